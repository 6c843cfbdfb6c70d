package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/postproc"
)

// usenetCollector exports the usenet indexers' totals (usenet.Counters fed
// by usenet.Counted), summed.
type usenetCollector struct {
	counters sources[*usenet.Counters]
	postproc sources[*postproc.Counters]
}

var (
	usenetRanges    = desc("usenet_ranges_indexed_total", "Ranges the usenet indexer indexed to the end.")
	usenetArticles  = desc("usenet_articles_indexed_total", "Overview lines (articles: parts of binaries) indexed.")
	usenetSkipped   = desc("usenet_lines_skipped_total", "Lines that were not usable overview lines.")
	usenetBinaries  = desc("usenet_binaries_changed_total", "Binaries created or changed.")
	usenetReleases  = desc("usenet_releases_changed_total", "Releases created or changed.")
	usenetPublished = desc("usenet_releases_published_total", "Visible releases written to the releases stream.")
	usenetUnmatched = desc("usenet_articles_unmatched_total", "Articles left out of every release for having neither a file name nor a part counter (obfuscated subjects); per group in work status.")
	usenetTooLarge  = desc("usenet_records_too_large_total", "Records (binaries, collections, or a release to publish) left as they were for not fitting the bus's largest message; the articles that would have grown them are left out.")
	usenetDescs     = []*prometheus.Desc{usenetRanges, usenetArticles, usenetSkipped, usenetBinaries, usenetReleases, usenetPublished, usenetUnmatched, usenetTooLarge}

	ppArticles   = desc("usenet_postprocess_articles_total", "Articles (bodies) post-processing fetched.")
	ppBytes      = desc("usenet_postprocess_bytes_total", "Bytes of the articles post-processing fetched, as the overview announced them.")
	ppReleases   = desc("usenet_postprocess_releases_total", "Releases post-processed.")
	ppRenamed    = desc("usenet_postprocess_renamed_total", "Post-processed releases that got real names for the release or its files.")
	ppPassworded = desc("usenet_postprocess_passworded_total", "Post-processed releases found passworded (password=1).")
	ppNFOs       = desc("usenet_postprocess_nfos_total", "NFOs read and stored.")
	ppDropped    = desc("usenet_postprocess_dropped_total", "Releases the post-processing queue had no room for, left to its next scan.")
	ppSeconds    = desc("usenet_postprocess_seconds_total", "Time spent post-processing releases, summed over its workers.")
	ppFailures   = desc("usenet_postprocess_failures_total", "Bodies that failed to fetch, decode or parse, by kind (fetch, decode, par2, rar, nfo).", "kind")
	ppDescs      = []*prometheus.Desc{ppArticles, ppBytes, ppReleases, ppRenamed, ppPassworded, ppNFOs, ppDropped, ppSeconds, ppFailures}
)

// AddPostProcess exports c.
func (r *Registry) AddPostProcess(c *postproc.Counters) { r.usenet.postproc.add(c) }

// AddUsenet exports c.
func (r *Registry) AddUsenet(c *usenet.Counters) { r.usenet.counters.add(c) }

func (c *usenetCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, usenetDescs...)
	describe(ch, ppDescs...)
}

func (c *usenetCollector) Collect(ch chan<- prometheus.Metric) {
	c.collectPostProcess(ch)
	cs := c.counters.snapshot()
	if len(cs) == 0 {
		return
	}
	var sum usenet.CounterStats
	for _, x := range cs {
		s := x.Stats()
		sum.Ranges += s.Ranges
		sum.Articles += s.Articles
		sum.Skipped += s.Skipped
		sum.Binaries += s.Binaries
		sum.Releases += s.Releases
		sum.Published += s.Published
		sum.Unmatched += s.Unmatched
		sum.TooLarge += s.TooLarge
	}
	counter(ch, usenetRanges, float64(sum.Ranges))
	counter(ch, usenetArticles, float64(sum.Articles))
	counter(ch, usenetSkipped, float64(sum.Skipped))
	counter(ch, usenetBinaries, float64(sum.Binaries))
	counter(ch, usenetReleases, float64(sum.Releases))
	counter(ch, usenetPublished, float64(sum.Published))
	counter(ch, usenetUnmatched, float64(sum.Unmatched))
	counter(ch, usenetTooLarge, float64(sum.TooLarge))
}

func (c *usenetCollector) collectPostProcess(ch chan<- prometheus.Metric) {
	ps := c.postproc.snapshot()
	if len(ps) == 0 {
		return
	}
	var sum postproc.Stats
	failures := map[string]int64{}
	for _, p := range ps {
		s := p.Stats()
		sum.Articles += s.Articles
		sum.Bytes += s.Bytes
		sum.Releases += s.Releases
		sum.Renamed += s.Renamed
		sum.Passworded += s.Passworded
		sum.NFOs += s.NFOs
		sum.Dropped += s.Dropped
		sum.Time += s.Time
		for k, n := range s.Failures {
			failures[k] += n
		}
	}
	counter(ch, ppArticles, float64(sum.Articles))
	counter(ch, ppBytes, float64(sum.Bytes))
	counter(ch, ppReleases, float64(sum.Releases))
	counter(ch, ppRenamed, float64(sum.Renamed))
	counter(ch, ppPassworded, float64(sum.Passworded))
	counter(ch, ppNFOs, float64(sum.NFOs))
	counter(ch, ppDropped, float64(sum.Dropped))
	counter(ch, ppSeconds, sum.Time.Seconds())
	// Every kind, so a rate over a kind that never failed is 0, not absent.
	for _, k := range []string{usenet.FailFetch, usenet.FailDecode, usenet.FailPar2, usenet.FailRAR, usenet.FailNFO} {
		counter(ch, ppFailures, float64(failures[k]), k)
	}
}
