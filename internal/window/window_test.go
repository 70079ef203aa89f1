package window

import (
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	cases := []struct {
		name             string
		interval, scrape time.Duration
		want             time.Duration
	}{
		{"spans four scrapes at Prometheus's default 60s scrape interval", 30 * time.Second, time.Minute, 4 * time.Minute},
		{"assumes Prometheus's default 60s scrape interval when none is configured", 30 * time.Second, 0, 4 * time.Minute},
		{"spans four scrapes at a 30s scrape interval", 30 * time.Second, 30 * time.Second, 2 * time.Minute},
		{"spans four scrapes at a 15s scrape interval", 30 * time.Second, 15 * time.Second, time.Minute},
		{"keeps a measurement interval longer than four scrapes", 5 * time.Minute, 15 * time.Second, 5 * time.Minute},
		{"spans four scrapes of a short scrape interval when the measurement interval is shorter", 2 * time.Second, time.Second, 4 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Of(tc.interval, tc.scrape)
			if got != tc.want {
				t.Fatalf("Of(%s, %s) = %s, want %s", tc.interval, tc.scrape, got, tc.want)
			}
			if s := max(tc.scrape, 0); s > 0 && got < ScrapesPerWindow*s {
				t.Fatalf("Of(%s, %s) = %s spans fewer than %d scrapes", tc.interval, tc.scrape, got, ScrapesPerWindow)
			}
		})
	}
}

// The scrape interval, and the settle time of one, take Prometheus's default where none is set.
func TestScrapeAndSettle(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{{0, DefaultScrapeInterval}, {-time.Second, DefaultScrapeInterval}, {15 * time.Second, 15 * time.Second}} {
		if got := Scrape(tc.in); got != tc.want {
			t.Errorf("Scrape(%s) = %s, want %s", tc.in, got, tc.want)
		}
		if got := Settle(tc.in); got != tc.want {
			t.Errorf("Settle(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
