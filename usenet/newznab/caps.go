package newznab

import (
	"context"
	"encoding/xml"
	"strconv"

	"github.com/switchyard-dev/switchyard/usenet"
)

// The t=caps shapes; the JSON form has the same fields.
type (
	capsDoc struct {
		XMLName    xml.Name     `xml:"caps" json:"-"`
		Server     capsServer   `xml:"server" json:"server"`
		Limits     capsLimits   `xml:"limits" json:"limits"`
		Register   capsRegister `xml:"registration" json:"registration"`
		Searching  capsSearches `xml:"searching" json:"searching"`
		Categories []capsCat    `xml:"categories>category" json:"categories"`
	}
	capsServer struct {
		Version string `xml:"version,attr" json:"version"`
		Title   string `xml:"title,attr" json:"title"`
	}
	capsLimits struct {
		Max     int `xml:"max,attr" json:"max"`
		Default int `xml:"default,attr" json:"default"`
	}
	capsRegister struct {
		Available string `xml:"available,attr" json:"available"`
		Open      string `xml:"open,attr" json:"open"`
	}
	capsSearches struct {
		Search      capsSearch `xml:"search" json:"search"`
		TVSearch    capsSearch `xml:"tv-search" json:"tv-search"`
		MovieSearch capsSearch `xml:"movie-search" json:"movie-search"`
	}
	capsSearch struct {
		Available       string `xml:"available,attr" json:"available"`
		SupportedParams string `xml:"supportedParams,attr" json:"supportedParams"`
	}
	capsCat struct {
		ID      string    `xml:"id,attr" json:"id"`
		Name    string    `xml:"name,attr" json:"name"`
		Subcats []capsCat `xml:"subcat" json:"subcat,omitempty"`
	}
)

// The parameters each search function honours, as caps advertises them.
// They must stay true: an app that reads an id here sends it instead of
// q (Sonarr sends every id listed in one request), and a listed parameter
// the search ignores answers releases of other shows. Sonarr's "Test"
// needs q, and q with season and ep; Radarr's needs q or imdbid in
// movie-search: q, because releases carry no ids (a search by imdbid
// alone would answer nothing, where without it Radarr searches by title).
const (
	searchParams      = "q"
	tvSearchParams    = "q,season,ep"
	movieSearchParams = "q"
)

// caps is the t=caps answer: the server, the page limits (both always
// present: Sonarr and Radarr int.Parse them, a missing one fails caps),
// whether t=register is there and open, the search functions and the whole
// standard category tree.
func (h *handler) caps(ctx context.Context) capsDoc {
	d := capsDoc{
		Server:   capsServer{Version: h.cfg.Version, Title: h.cfg.Title},
		Limits:   capsLimits{Max: h.cfg.MaxLimit, Default: h.cfg.DefaultLimit},
		Register: capsRegister{Available: "no", Open: "no"},
		Searching: capsSearches{
			Search:      capsSearch{"yes", searchParams},
			TVSearch:    capsSearch{"yes", tvSearchParams},
			MovieSearch: capsSearch{"yes", movieSearchParams},
		},
	}
	if h.cfg.Users != nil {
		d.Register.Available = "yes"
		// An unreadable setting shows as closed, which t=register
		// answers too when it cannot read it; caps itself still works.
		if r, err := h.cfg.Users.Registration(ctx); err == nil && r.Open {
			d.Register.Open = "yes"
		}
	}
	for _, p := range usenet.Categories {
		c := capsCat{ID: strconv.Itoa(p.ID), Name: p.Name}
		for _, s := range p.Subcats {
			c.Subcats = append(c.Subcats, capsCat{ID: strconv.Itoa(s.ID), Name: s.Name})
		}
		d.Categories = append(d.Categories, c)
	}
	return d
}
