package scoring

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Table combines finished scoring runs (one per seed and guidance scale, each a folder with a
// report.json) into the paper's Table 3 layout: one table per guidance scale, one row per
// configuration, mean ± std over the seeds that ran it.
func Table(dirs []string) (string, error) {
	var runs []finishedRun
	for _, dir := range dirs {
		r, err := readFinishedRun(dir)
		if err != nil {
			return "", err
		}
		runs = append(runs, r)
	}
	return table3(runs)
}

type finishedRun struct {
	dir      string
	Settings Settings       `json:"settings"`
	Results  []configResult `json:"results"`
}

func readFinishedRun(dir string) (finishedRun, error) {
	r := finishedRun{dir: dir}
	path := filepath.Join(dir, "report.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("%s: %v (is the run finished? marspec eval writes report.json when every chunk is done)", dir, err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("%s: %v", path, err)
	}
	if len(r.Results) == 0 {
		return r, fmt.Errorf("%s: no results", path)
	}
	return r, nil
}

// tableRow gathers one configuration's results over seeds.
type tableRow struct {
	name, desc             string
	seeds                  []uint64
	fid, is, acc, sp, secs []float64
	alpha                  []float64
}

func table3(runs []finishedRun) (string, error) {
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].Settings.Seed < runs[j].Settings.Seed })
	n, temp, steps := runs[0].Settings.N, runs[0].Settings.Temperature, runs[0].Settings.Steps
	var scales []float64
	tables := map[float64][]*tableRow{}
	for _, r := range runs {
		s := r.Settings
		if s.N != n || s.Temperature != temp || s.Steps != steps || s.Target != runs[0].Settings.Target || s.Draft != runs[0].Settings.Draft {
			return "", fmt.Errorf("%s: settings differ from %s (n %d/%d, temperature %g/%g, steps %d/%d, packs %s+%s / %s+%s); a table compares like with like",
				r.dir, runs[0].dir, s.N, n, s.Temperature, temp, s.Steps, steps, s.Target, s.Draft, runs[0].Settings.Target, runs[0].Settings.Draft)
		}
		if _, ok := tables[s.CFG]; !ok {
			scales = append(scales, s.CFG)
		}
		for _, res := range r.Results {
			row := findRow(tables[s.CFG], res.Name)
			if row == nil {
				row = &tableRow{name: res.Name, desc: res.Description}
				tables[s.CFG] = append(tables[s.CFG], row)
			}
			for _, seed := range row.seeds {
				if seed == s.Seed {
					return "", fmt.Errorf("%s: configuration %s at cfg %g and seed %d is in two runs", r.dir, res.Name, s.CFG, seed)
				}
			}
			row.seeds = append(row.seeds, s.Seed)
			row.fid = append(row.fid, res.FID)
			row.is = append(row.is, res.ISMean)
			row.acc = append(row.acc, res.ClassAccuracy)
			row.secs = append(row.secs, res.SecondsImage)
			if res.Alpha != nil {
				row.alpha = append(row.alpha, *res.Alpha)
			}
			if res.Speedup != nil {
				row.sp = append(row.sp, *res.Speedup)
			}
		}
	}
	sort.Float64s(scales)
	var b strings.Builder
	for _, cfg := range scales {
		guidance := "CFG off (scale 1)"
		if cfg != 1 {
			guidance = fmt.Sprintf("CFG on (scale %g, MAR's linear schedule)", cfg)
		}
		fmt.Fprintf(&b, "### %s — N = %d images per row and seed\n\n", guidance, n)
		b.WriteString("| configuration | seeds | FID ↓ | IS ↑ | class accuracy | alpha | s/image | speedup vs target (same run) |\n|---|---|---|---|---|---|---|---|\n")
		for _, r := range tables[cfg] {
			seeds := make([]string, len(r.seeds))
			for i, s := range r.seeds {
				seeds[i] = fmt.Sprint(s)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.desc, strings.Join(seeds, ","),
				meanStd(r.fid, "%.2f"), meanStd(r.is, "%.2f"), meanStd(r.acc, "%.3f"), meanStd(r.alpha, "%.3f"),
				meanStd(r.secs, "%.3f"), meanStd(r.sp, "%.2fx"))
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

func findRow(rows []*tableRow, name string) *tableRow {
	for _, r := range rows {
		if r.name == name {
			return r
		}
	}
	return nil
}

// meanStd formats one value as is, several as mean ± sample standard deviation, none as a dash.
func meanStd(xs []float64, format string) string {
	switch len(xs) {
	case 0:
		return "–"
	case 1:
		return fmt.Sprintf(format, xs[0])
	}
	var mean, ss float64
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	std := math.Sqrt(ss / float64(len(xs)-1))
	return fmt.Sprintf(format, mean) + " ± " + strings.TrimSuffix(fmt.Sprintf(format, std), "x")
}
