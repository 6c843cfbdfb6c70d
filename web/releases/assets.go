package releases

import (
	"embed"
	"io/fs"
)

// assets are the page (the list and, with ?id=, one release), its script
// and its stylesheet: plain files, no build step, nothing fetched from
// elsewhere (but the watch gateway's client, /ws/watch.js, of the same
// origin). The page holds no data, so it needs no credentials.
//
//go:embed assets/index.html assets/releases.js assets/releases.css
var assets embed.FS

var (
	assetFS, _ = fs.Sub(assets, "assets")
	page, _    = fs.ReadFile(assetFS, "index.html")
)
