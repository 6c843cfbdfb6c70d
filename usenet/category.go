package usenet

// The standard Newznab category ids this indexer assigns. A parent id is a
// multiple of 1000; its subcategories share its thousands.
const (
	CatConsole    = 1000
	CatMovies     = 2000
	CatMoviesSD   = 2030
	CatMoviesHD   = 2040
	CatMoviesUHD  = 2045
	CatAudio      = 3000
	CatAudioMP3   = 3010
	CatAudioFLAC  = 3040
	CatPC         = 4000
	CatTV         = 5000
	CatTVSD       = 5030
	CatTVHD       = 5040
	CatTVUHD      = 5045
	CatTVAnime    = 5070
	CatXXX        = 6000
	CatBooks      = 7000
	CatBooksEbook = 7020
	CatBooksComic = 7030
	CatOther      = 8000
	CatOtherMisc  = 8010
)

// Category is one entry of the category tree that t=caps lists.
type Category struct {
	ID      int
	Name    string
	Subcats []Category
}

// Categories is the tree of the categories this indexer assigns, parents in
// id order, each with its subcategories in id order.
var Categories = []Category{
	{ID: CatConsole, Name: "Console"},
	{ID: CatMovies, Name: "Movies", Subcats: []Category{
		{ID: CatMoviesSD, Name: "SD"}, {ID: CatMoviesHD, Name: "HD"}, {ID: CatMoviesUHD, Name: "UHD"},
	}},
	{ID: CatAudio, Name: "Audio", Subcats: []Category{
		{ID: CatAudioMP3, Name: "MP3"}, {ID: CatAudioFLAC, Name: "Lossless"},
	}},
	{ID: CatPC, Name: "PC"},
	{ID: CatTV, Name: "TV", Subcats: []Category{
		{ID: CatTVSD, Name: "SD"}, {ID: CatTVHD, Name: "HD"}, {ID: CatTVUHD, Name: "UHD"}, {ID: CatTVAnime, Name: "Anime"},
	}},
	{ID: CatXXX, Name: "XXX"},
	{ID: CatBooks, Name: "Books", Subcats: []Category{
		{ID: CatBooksEbook, Name: "Ebook"}, {ID: CatBooksComic, Name: "Comics"},
	}},
	{ID: CatOther, Name: "Other", Subcats: []Category{
		{ID: CatOtherMisc, Name: "Misc"},
	}},
}

// CategoryParent is the parent of id (id itself for a parent).
func CategoryParent(id int) int { return id / 1000 * 1000 }

// CategoryName is the display name of id, "Parent > Sub" for a
// subcategory ("TV > HD"), or "" for an id not in Categories.
func CategoryName(id int) string {
	for _, p := range Categories {
		if p.ID == id {
			return p.Name
		}
		for _, s := range p.Subcats {
			if s.ID == id {
				return p.Name + " > " + s.Name
			}
		}
	}
	return ""
}
