package prefill

import "testing"

func TestCount(t *testing.T) {
	cases := []struct {
		ratio float64
		L     int
		want  int
	}{{0, 49, 0}, {0.05, 49, 3}, {0.15, 49, 8}, {1, 49, 49}, {0.05, 256, 13}, {0.05, 20, 1}, {0.01, 10, 1}}
	for _, c := range cases {
		got, err := Count(c.ratio, c.L)
		if err != nil || got != c.want {
			t.Errorf("Count(%g, %d) = %d, %v; want %d", c.ratio, c.L, got, err, c.want)
		}
	}
	for _, bad := range []float64{-0.1, 1.5} {
		if _, err := Count(bad, 49); err == nil {
			t.Errorf("ratio %g accepted", bad)
		}
	}
}
