package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-dev/switchyard/usenet"
)

// usenetCollector exports the usenet indexers' totals (usenet.Counters fed
// by usenet.Counted), summed.
type usenetCollector struct {
	counters sources[*usenet.Counters]
}

var (
	usenetRanges    = desc("usenet_ranges_indexed_total", "Ranges the usenet indexer indexed to the end.")
	usenetArticles  = desc("usenet_articles_indexed_total", "Overview lines (articles: parts of binaries) indexed.")
	usenetSkipped   = desc("usenet_lines_skipped_total", "Lines that were not usable overview lines.")
	usenetBinaries  = desc("usenet_binaries_changed_total", "Binaries created or changed.")
	usenetReleases  = desc("usenet_releases_changed_total", "Releases created or changed.")
	usenetPublished = desc("usenet_releases_published_total", "Visible releases written to the releases stream.")
	usenetUnmatched = desc("usenet_articles_unmatched_total", "Articles left out of every release for having neither a file name nor a part counter (obfuscated subjects), by group.", "group")
	usenetDescs     = []*prometheus.Desc{usenetRanges, usenetArticles, usenetSkipped, usenetBinaries, usenetReleases, usenetPublished, usenetUnmatched}
)

// AddUsenet exports c.
func (r *Registry) AddUsenet(c *usenet.Counters) { r.usenet.counters.add(c) }

func (c *usenetCollector) Describe(ch chan<- *prometheus.Desc) { describe(ch, usenetDescs...) }

func (c *usenetCollector) Collect(ch chan<- prometheus.Metric) {
	cs := c.counters.snapshot()
	if len(cs) == 0 {
		return
	}
	var sum usenet.CounterStats
	unmatched := map[string]int64{}
	for _, x := range cs {
		s := x.Stats()
		sum.Ranges += s.Ranges
		sum.Articles += s.Articles
		sum.Skipped += s.Skipped
		sum.Binaries += s.Binaries
		sum.Releases += s.Releases
		sum.Published += s.Published
		for g, n := range s.Unmatched {
			unmatched[g] += n
		}
	}
	counter(ch, usenetRanges, float64(sum.Ranges))
	counter(ch, usenetArticles, float64(sum.Articles))
	counter(ch, usenetSkipped, float64(sum.Skipped))
	counter(ch, usenetBinaries, float64(sum.Binaries))
	counter(ch, usenetReleases, float64(sum.Releases))
	counter(ch, usenetPublished, float64(sum.Published))
	for g, n := range unmatched {
		counter(ch, usenetUnmatched, float64(n), g)
	}
}
