package dashboard

import (
	"embed"
	"io/fs"
)

// assets are the page, its script and its stylesheet: plain files, no
// build step, nothing fetched from elsewhere.
//
//go:embed assets/index.html assets/dashboard.js assets/dashboard.css
var assets embed.FS

// assetFS is assets without its directory prefix.
var assetFS, _ = fs.Sub(assets, "assets")

// page is index.html, read once.
var page, _ = fs.ReadFile(assetFS, "index.html")
