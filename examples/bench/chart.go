package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
)

// chartSVG draws the latency percentiles (p50, p90, p99, p99.9, max) of
// every run: one panel per scenario, one line per mode and acks, on a
// logarithmic axis shared by the panels.
func chartSVG(results []*result) []byte {
	const (
		panelW, panelH = 380, 250
		left, right    = 56, 12
		top, bottom    = 28, 34
		cols           = 3
		legendH        = 64
	)
	var names []string
	for _, sc := range scenarios {
		for _, r := range results {
			if r.Scenario == sc.Name {
				names = append(names, sc.Name)
				break
			}
		}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range results {
		for _, v := range percentiles(r) {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 1000
	}
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	rows := max((len(names)+cols-1)/cols, 1)
	width, height := cols*panelW, legendH+rows*panelH
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="10" y="18" font-size="14" font-weight="bold">Produce latency percentiles (ms, log scale) by scenario: diskless vs classic, acks 0 / 1 / all</text>` + "\n")
	// Legend.
	series := seriesOf(results)
	for i, s := range series {
		x, y := 10+(i%4)*290, 34+(i/4)*14
		p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2.5"%s/>`, x, y, x+24, y, s.color, s.dash)
		p(`<text x="%d" y="%d">%s</text>`+"\n", x+30, y+4, html.EscapeString(s.label))
	}
	labels := []string{"p50", "p90", "p99", "p99.9", "max"}
	for i, name := range names {
		ox, oy := (i%cols)*panelW, legendH+(i/cols)*panelH
		pw, ph := panelW-left-right, panelH-top-bottom
		yOf := func(v float64) float64 {
			v = math.Max(v, lo)
			return float64(oy+top) + float64(ph)*(1-(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo)))
		}
		xOf := func(j int) float64 { return float64(ox+left) + float64(pw)*float64(j)/float64(len(labels)-1) }
		p(`<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", ox+left, oy+top-8, name)
		p(`<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", ox+left, oy+top, pw, ph)
		for d := lo; d <= hi*1.0001; d *= 10 {
			y := yOf(d)
			p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`, ox+left, y, ox+left+pw, y)
			p(`<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", ox+left-4, y+4, axisLabel(d))
		}
		for j, l := range labels {
			p(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", xOf(j), oy+top+ph+16, l)
		}
		for _, s := range series {
			for _, r := range results {
				if r.Scenario != name || seriesKey(r) != s.key || r.Requests == 0 || r.OpenLoopRow {
					continue
				}
				var pts bytes.Buffer
				for j, v := range percentiles(r) {
					fmt.Fprintf(&pts, "%.1f,%.1f ", xOf(j), yOf(v))
				}
				p(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", bytes.TrimSpace(pts.Bytes()), s.color, s.dash)
			}
		}
	}
	p("</svg>\n")
	return b.Bytes()
}

func percentiles(r *result) []float64 {
	return []float64{r.P50Ms, r.P90Ms, r.P99Ms, r.P999Ms, r.MaxMs}
}

func axisLabel(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%gs", v/1000)
	case v >= 1:
		return fmt.Sprintf("%g", v)
	}
	return fmt.Sprintf("%gµs", v*1000)
}

type chartSeries struct {
	key, label, color, dash string
}

func seriesKey(r *result) string { return r.Mode + "/" + r.Metadata + "/" + r.Acks }

// seriesOf returns the series present, in a fixed order and palette.
func seriesOf(results []*result) []chartSeries {
	palette := map[string][3]string{
		"diskless/bucket": {"#9ecae1", "#4292c6", "#08306b"},
		"diskless/memory": {"#a1d99b", "#41ab5d", "#00441b"},
		"classic/":        {"#fdae6b", "#f16913", "#7f2704"},
	}
	var out []chartSeries
	for _, group := range []string{"diskless/bucket", "diskless/memory", "classic/"} {
		for i, acks := range []string{"0", "1", "all"} {
			key := group + "/" + acks
			for _, r := range results {
				if seriesKey(r) != key {
					continue
				}
				label := fmt.Sprintf("%s acks=%s", r.Mode, acks)
				if r.Metadata != "" {
					label = fmt.Sprintf("%s (%s log) acks=%s", r.Mode, r.Metadata, acks)
				}
				dash := ""
				if r.Mode == "classic" {
					dash = ` stroke-dasharray="5,3"`
				}
				out = append(out, chartSeries{key: key, label: label, color: palette[group][i], dash: dash})
				break
			}
		}
	}
	return out
}
