package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
)

// results holds every repetition's value of every measurement, keyed by
// bench, mode, size, metric and implementation.
type results struct {
	mu    sync.Mutex
	m     map[string][]float64
	notes []string
	text  map[string]string
}

func newResults() *results { return &results{m: map[string][]float64{}, text: map[string]string{}} }

// note records a failure or caveat for the report.
func (r *results) note(s string) {
	r.mu.Lock()
	r.notes = append(r.notes, s)
	r.mu.Unlock()
}

func rkey(parts ...any) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, "|")
}

func (r *results) add(v float64, parts ...any) {
	if math.IsNaN(v) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := rkey(parts...)
	r.m[k] = append(r.m[k], v)
}

func (r *results) get(parts ...any) []float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]float64(nil), r.m[rkey(parts...)]...)
}

// stat is the median and range of one measurement's repetitions.
type stat struct {
	n             int
	med, min, max float64
}

func stats(vs []float64) stat {
	if len(vs) == 0 {
		return stat{}
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stat{n: len(s), med: med, min: s[0], max: s[len(s)-1]}
}

// format prints median [min–max] with unit scaling chosen by unit.
func (s stat) format(unit string) string {
	if s.n == 0 {
		return "–"
	}
	f := func(v float64) string { return fmtUnit(v, unit) }
	if s.n == 1 {
		return f(s.med)
	}
	return fmt.Sprintf("%s [%s–%s]", f(s.med), strings.TrimSuffix(f(s.min), " "+unit), f(s.max))
}

func fmtUnit(v float64, unit string) string {
	if unit == "" {
		return strings.TrimSuffix(fmtUnit(v, "x"), " x")
	}
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	case v >= 10:
		return fmt.Sprintf("%.1f %s", v, unit)
	default:
		return fmt.Sprintf("%.3g %s", v, unit)
	}
}

// ratio is a/b of the medians.
func ratio(a, b stat) string {
	if a.n == 0 || b.n == 0 || b.med == 0 {
		return "–"
	}
	r := a.med / b.med
	if r < 0.01 {
		// Two significant digits rather than "0.00×".
		return fmt.Sprintf("%.2g×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}
