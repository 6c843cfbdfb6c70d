package usenet

// The standard Newznab category ids: those of the nZEDb specification,
// plus 2045 and 5045 (UHD), 5010 (WEB-DL) and 8020 (Hashed) that
// Prowlarr's standard list adds. A parent id is a multiple of 1000; its
// subcategories share its thousands. Categorize assigns only some of them
// (see catRules); t=caps lists all, so that an app can map every id it
// knows.
const (
	CatConsole           = 1000
	CatConsoleNDS        = 1010
	CatConsolePSP        = 1020
	CatConsoleWii        = 1030
	CatConsoleXbox       = 1040
	CatConsoleXbox360    = 1050
	CatConsoleWiiware    = 1060
	CatConsoleXbox360DLC = 1070
	CatConsolePS3        = 1080

	CatMovies        = 2000
	CatMoviesForeign = 2010
	CatMoviesOther   = 2020
	CatMoviesSD      = 2030
	CatMoviesHD      = 2040
	CatMoviesUHD     = 2045
	CatMoviesBluRay  = 2050
	CatMovies3D      = 2060

	CatAudio          = 3000
	CatAudioMP3       = 3010
	CatAudioVideo     = 3020
	CatAudioAudiobook = 3030
	CatAudioFLAC      = 3040 // "Lossless"

	CatPC              = 4000
	CatPC0day          = 4010
	CatPCISO           = 4020
	CatPCMac           = 4030
	CatPCMobileOther   = 4040
	CatPCGames         = 4050
	CatPCMobileIOS     = 4060
	CatPCMobileAndroid = 4070

	CatTV            = 5000
	CatTVWebDL       = 5010
	CatTVForeign     = 5020
	CatTVSD          = 5030
	CatTVHD          = 5040
	CatTVUHD         = 5045
	CatTVOther       = 5050
	CatTVSport       = 5060
	CatTVAnime       = 5070
	CatTVDocumentary = 5080

	CatXXX         = 6000
	CatXXXDVD      = 6010
	CatXXXWMV      = 6020
	CatXXXXviD     = 6030
	CatXXXx264     = 6040
	CatXXXPack     = 6050
	CatXXXImageSet = 6060
	CatXXXOther    = 6070

	CatBooks      = 7000
	CatBooksMags  = 7010
	CatBooksEbook = 7020
	CatBooksComic = 7030 // "Comics"

	CatOther       = 8000
	CatOtherMisc   = 8010
	CatOtherHashed = 8020
)

// Category is one entry of the category tree that t=caps lists.
type Category struct {
	ID      int
	Name    string
	Subcats []Category
}

// Categories is the standard category tree, parents in id order, each
// with its subcategories in id order. The names are those of Prowlarr's
// standard list ("TV" and "HD" for its "TV/HD"): Prowlarr maps an
// indexer's categories to its own by parent and subcategory name, and
// falls back to the id only when the names do not match.
var Categories = []Category{
	{ID: CatConsole, Name: "Console", Subcats: []Category{
		{ID: CatConsoleNDS, Name: "NDS"}, {ID: CatConsolePSP, Name: "PSP"}, {ID: CatConsoleWii, Name: "Wii"},
		{ID: CatConsoleXbox, Name: "XBox"}, {ID: CatConsoleXbox360, Name: "XBox 360"}, {ID: CatConsoleWiiware, Name: "Wiiware"},
		{ID: CatConsoleXbox360DLC, Name: "XBox 360 DLC"}, {ID: CatConsolePS3, Name: "PS3"},
	}},
	{ID: CatMovies, Name: "Movies", Subcats: []Category{
		{ID: CatMoviesForeign, Name: "Foreign"}, {ID: CatMoviesOther, Name: "Other"}, {ID: CatMoviesSD, Name: "SD"},
		{ID: CatMoviesHD, Name: "HD"}, {ID: CatMoviesUHD, Name: "UHD"}, {ID: CatMoviesBluRay, Name: "BluRay"},
		{ID: CatMovies3D, Name: "3D"},
	}},
	{ID: CatAudio, Name: "Audio", Subcats: []Category{
		{ID: CatAudioMP3, Name: "MP3"}, {ID: CatAudioVideo, Name: "Video"}, {ID: CatAudioAudiobook, Name: "Audiobook"},
		{ID: CatAudioFLAC, Name: "Lossless"},
	}},
	{ID: CatPC, Name: "PC", Subcats: []Category{
		{ID: CatPC0day, Name: "0day"}, {ID: CatPCISO, Name: "ISO"}, {ID: CatPCMac, Name: "Mac"},
		{ID: CatPCMobileOther, Name: "Mobile-Other"}, {ID: CatPCGames, Name: "Games"}, {ID: CatPCMobileIOS, Name: "Mobile-iOS"},
		{ID: CatPCMobileAndroid, Name: "Mobile-Android"},
	}},
	{ID: CatTV, Name: "TV", Subcats: []Category{
		{ID: CatTVWebDL, Name: "WEB-DL"}, {ID: CatTVForeign, Name: "Foreign"}, {ID: CatTVSD, Name: "SD"},
		{ID: CatTVHD, Name: "HD"}, {ID: CatTVUHD, Name: "UHD"}, {ID: CatTVOther, Name: "Other"},
		{ID: CatTVSport, Name: "Sport"}, {ID: CatTVAnime, Name: "Anime"}, {ID: CatTVDocumentary, Name: "Documentary"},
	}},
	{ID: CatXXX, Name: "XXX", Subcats: []Category{
		{ID: CatXXXDVD, Name: "DVD"}, {ID: CatXXXWMV, Name: "WMV"}, {ID: CatXXXXviD, Name: "XviD"},
		{ID: CatXXXx264, Name: "x264"}, {ID: CatXXXPack, Name: "Pack"}, {ID: CatXXXImageSet, Name: "ImageSet"},
		{ID: CatXXXOther, Name: "Other"},
	}},
	{ID: CatBooks, Name: "Books", Subcats: []Category{
		{ID: CatBooksMags, Name: "Mags"}, {ID: CatBooksEbook, Name: "EBook"}, {ID: CatBooksComic, Name: "Comics"},
	}},
	{ID: CatOther, Name: "Other", Subcats: []Category{
		{ID: CatOtherMisc, Name: "Misc"}, {ID: CatOtherHashed, Name: "Hashed"},
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
