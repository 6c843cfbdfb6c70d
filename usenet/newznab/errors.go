package newznab

// Error codes of the Newznab API.
const (
	ErrCredentials    = 100 // incorrect user credentials
	ErrMissingParam   = 200 // missing parameter
	ErrIncorrectParam = 201 // incorrect parameter
	ErrNoSuchFunction = 202 // no such function
	ErrNoSuchItem     = 300 // no such item
	ErrUnknown        = 900 // unknown error
)

// apiError is an error answer: code and description, written with HTTP
// status 200 as indexers do (clients read the code from the body).
type apiError struct {
	Code        int
	Description string
}

func (e *apiError) Error() string { return e.Description }

func errorf(code int, desc string) *apiError { return &apiError{Code: code, Description: desc} }
