package newznab

import "time"

// Error codes of the Newznab API (the spec's section 5; 501 is NNTmux's).
const (
	ErrCredentials          = 100 // incorrect user credentials
	ErrAccountSuspended     = 101 // account suspended
	ErrInsufficientPrivs    = 102 // insufficient privileges
	ErrRegistrationDenied   = 103 // registration denied
	ErrRegistrationsClosed  = 104 // registrations are closed
	ErrEmailTaken           = 105 // invalid registration (email address taken)
	ErrEmailBadFormat       = 106 // invalid registration (email address bad format)
	ErrRegistrationFailed   = 107 // registration failed (data error)
	ErrMissingParam         = 200 // missing parameter
	ErrIncorrectParam       = 201 // incorrect parameter
	ErrNoSuchFunction       = 202 // no such function
	ErrFunctionNotAvailable = 203 // function not available
	ErrNoSuchItem           = 300 // no such item
	ErrRequestLimit         = 500 // request limit reached
	ErrDownloadLimit        = 501 // download limit reached
	ErrUnknown              = 900 // unknown error
	ErrAPIDisabled          = 910 // API disabled
)

// descriptions are the spec's texts of the codes, which clients match:
// Sonarr and Radarr treat a description containing "Missing parameter"
// (with no key sent) as "API key required", and back off an hour on
// exactly "Request limit reached".
var descriptions = map[int]string{
	ErrCredentials:          "Incorrect user credentials",
	ErrAccountSuspended:     "Account suspended",
	ErrInsufficientPrivs:    "Insufficient privileges/not authorized",
	ErrRegistrationDenied:   "Registration denied",
	ErrRegistrationsClosed:  "Registrations are closed",
	ErrEmailTaken:           "Invalid registration (Email Address Taken)",
	ErrEmailBadFormat:       "Invalid registration (Email Address Bad Format)",
	ErrRegistrationFailed:   "Registration Failed (Data error)",
	ErrMissingParam:         "Missing parameter",
	ErrIncorrectParam:       "Incorrect parameter",
	ErrNoSuchFunction:       "No such function",
	ErrFunctionNotAvailable: "Function not available",
	ErrNoSuchItem:           "No such item",
	ErrRequestLimit:         "Request limit reached",
	ErrDownloadLimit:        "Download limit reached",
	ErrUnknown:              "Unknown error",
	ErrAPIDisabled:          "API disabled",
}

// exact are the codes whose description is the spec's text alone:
// clients compare it whole, so a detail would hide what it means.
var exact = map[int]bool{ErrRequestLimit: true, ErrDownloadLimit: true}

// apiError is an error answer: code and description, written with HTTP
// status 200 as indexers do (clients read the code from the body).
type apiError struct {
	Code        int
	Description string
	// Reset, for 500 and 501, is when the limit resets and Wait how long
	// that is: the answer says it beside the description (which must stay
	// the spec's text), as a reset attribute and a Retry-After header.
	Reset time.Time
	Wait  time.Duration
}

func (e *apiError) Error() string { return e.Description }

// errorf is the error of code with the spec's description, followed by
// detail in parentheses as nZEDb writes it ("Incorrect parameter (limit:
// want a number >= 0)"); "" adds none, and codes clients compare whole
// (500, 501) never get one.
func errorf(code int, detail string) *apiError {
	desc, ok := descriptions[code]
	if !ok {
		desc = descriptions[ErrUnknown]
	}
	if detail != "" && !exact[code] {
		desc += " (" + detail + ")"
	}
	return &apiError{Code: code, Description: desc}
}
