package bench

import (
	"math"
	"sort"
	"time"
)

// Summary describes a set of latencies.
type Summary struct {
	Count                    int
	P50, P90, P99, Max, Mean time.Duration
}

// Summarize computes nearest-rank percentiles of d (which it sorts).
func Summarize(d []time.Duration) Summary {
	if len(d) == 0 {
		return Summary{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	return Summary{
		Count: len(d),
		P50:   percentile(d, 0.50),
		P90:   percentile(d, 0.90),
		P99:   percentile(d, 0.99),
		Max:   d[len(d)-1],
		Mean:  sum / time.Duration(len(d)),
	}
}

// percentile is the nearest-rank percentile of sorted: the smallest value
// that at least p of the values are less than or equal to.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	return sorted[i]
}

// Ratio is a/b at each statistic, for comparing one latency with a baseline.
type Ratio struct{ P50, P90, P99, Max float64 }

// RatioOf divides a by b statistic by statistic (NaN where b is zero).
func RatioOf(a, b Summary) Ratio {
	div := func(x, y time.Duration) float64 {
		if y == 0 {
			return math.NaN()
		}
		return float64(x) / float64(y)
	}
	return Ratio{P50: div(a.P50, b.P50), P90: div(a.P90, b.P90), P99: div(a.P99, b.P99), Max: div(a.Max, b.Max)}
}
