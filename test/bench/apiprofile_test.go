package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// TestProfileParts counts a sample once in a part, however many of the
// part's functions its stack holds, and in every part whose function it
// holds.
func TestProfileParts(t *testing.T) {
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	update, patch, gc, other := fn(1, "update"), fn(2, "patch"), fn(3, "gc"), fn(4, "other")
	loc := func(id uint64, f *profile.Function) *profile.Location {
		return &profile.Location{ID: id, Line: []profile.Line{{Function: f}}}
	}
	lu, lp, lg, lo := loc(1, update), loc(2, patch), loc(3, gc), loc(4, other)
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Function:   []*profile.Function{update, patch, gc, other},
		Location:   []*profile.Location{lu, lp, lg, lo},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{lu, lp}, Value: []int64{1, int64(10 * time.Millisecond)}},
			{Location: []*profile.Location{lo, lu}, Value: []int64{1, int64(20 * time.Millisecond)}},
			{Location: []*profile.Location{lg}, Value: []int64{1, int64(40 * time.Millisecond)}},
			{Location: []*profile.Location{lo}, Value: []int64{1, int64(80 * time.Millisecond)}},
		},
	}
	path := filepath.Join(t.TempDir(), "cpu")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	parts := []APIPart{{Name: "writes", Funcs: []string{"update", "patch"}}, {Name: "gc", Funcs: []string{"gc"}}, {Name: "none", Funcs: []string{"absent"}}}
	total, by, err := ProfileParts(path, parts)
	if err != nil {
		t.Fatal(err)
	}
	if total != 150*time.Millisecond {
		t.Errorf("total %v, want 150ms", total)
	}
	want := []time.Duration{30 * time.Millisecond, 40 * time.Millisecond, 0}
	for i := range want {
		if by[i] != want[i] {
			t.Errorf("part %s: %v, want %v", parts[i].Name, by[i], want[i])
		}
	}
}
