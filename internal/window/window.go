// Package window says how long an analysis window is: the span of samples a measurement reads,
// derived from the measurement interval and the Prometheus scrape interval. A rate over fewer
// than a few scrape intervals is empty or noise: with Prometheus's default scrape interval of
// 60s, a 1m window holds one sample per series and every rate in it is empty, which holds a
// rollout forever. It is pure, so that
// the rollout machine (which waits for a window of samples) and the query templates (which
// read {{.Window}}) agree without the machine depending on the Prometheus adapter.
package window

import "time"

const (
	// ScrapesPerWindow is the number of scrape intervals an analysis window spans at least.
	ScrapesPerWindow = 4
	// DefaultScrapeInterval is the scrape interval assumed when none is configured:
	// Prometheus's own default (global.scrape_interval).
	DefaultScrapeInterval = time.Minute
)

// Of is the analysis window for a measurement interval and a scrape interval: the longer of
// the interval and ScrapesPerWindow scrape intervals. A scrape interval that is not positive is
// DefaultScrapeInterval. At a 60s scrape interval the window is 4m; at 15s with a 30s
// measurement interval, 1m.
func Of(interval, scrapeInterval time.Duration) time.Duration {
	if scrapeInterval <= 0 {
		scrapeInterval = DefaultScrapeInterval
	}
	return max(interval, ScrapesPerWindow*scrapeInterval)
}

// Settle is how long after a step's weight switch its analysis window opens: one scrape
// interval (DefaultScrapeInterval when not positive). Histograms count requests as they
// finish, so a window opened at the switch counts requests queued before it; by the first
// scrape after the switch, the queues a burst built at the old weights have mostly drained.
func Settle(scrapeInterval time.Duration) time.Duration {
	return Scrape(scrapeInterval)
}

// Scrape is the scrape interval: scrapeInterval, DefaultScrapeInterval when not positive.
func Scrape(scrapeInterval time.Duration) time.Duration {
	if scrapeInterval <= 0 {
		return DefaultScrapeInterval
	}
	return scrapeInterval
}
