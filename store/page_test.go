package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"marspec/api"
	"marspec/store/storetest"
)

// caseKeyset: paging by cursor lists every job once, in List's order, ties of created
// included, with and without a filter; ImagesOf returns each job's images in index order.
func caseKeyset(t *testing.T, m Meta) {
	var all []Job
	for i := range 9 {
		j := job(fmt.Sprintf("k%d", 8-i), i/3, api.StatusSucceeded, []string{"target", "draft"}[i%2], 1) // three per second: ties
		all = append(all, j)
	}
	mustCreate(t, m, all...)
	for _, f := range []Filter{{}, {Mode: "draft"}} {
		want, _, err := m.List(f, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []Job
		page, _, err := m.List(f, 2, 0)
		for err == nil && len(page) > 0 {
			got = append(got, page...)
			page, err = m.After(f, 2, CursorOf(page[len(page)-1]))
		}
		if err != nil || !slices.Equal(ids(got), ids(want)) {
			t.Errorf("filter %+v: by cursor %v, by offset %v (%v)", f, ids(got), ids(want), err)
		}
	}
	for _, idx := range []int{2, 0, 1} {
		if err := m.PutImage(Image{ID: ImageID("k3", idx), JobID: "k3", Index: idx, ClassName: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.PutImage(Image{ID: ImageID("k5", 0), JobID: "k5", ClassName: "c"}); err != nil {
		t.Fatal(err)
	}
	byJob, err := m.ImagesOf([]string{"k3", "k5", "k7"})
	if err != nil || len(byJob["k3"]) != 3 || len(byJob["k5"]) != 1 || len(byJob["k7"]) != 0 || byJob["k3"][2].Index != 2 {
		t.Fatalf("images of a page: %+v %v", byJob, err)
	}
	if c, err := ParseCursor(CursorOf(all[4]).String()); err != nil || c != CursorOf(all[4]) {
		t.Fatalf("cursor round trip: %+v %v", c, err)
	}
	for _, bad := range []string{"", "x_y", "12", "12_"} {
		if _, err := ParseCursor(bad); err == nil {
			t.Errorf("cursor %q accepted", bad)
		}
	}
}

// A page of the job list at 200,000 jobs: the cursor page deep in the list and the first
// page run in under 5 ms (EXPLAIN ANALYZE, best of three on this shared machine), where the
// old window count read every row.
func TestJobListPageAt200kJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts 200,000 jobs")
	}
	dsn := storetest.Postgres(t)
	p, err := OpenPostgres(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const n = 200_000
	for _, sql := range []string{
		`INSERT INTO jobs (id, created, status, mode, classes, request, settings)
			SELECT md5(g::text), 1764000000000000000 + g::bigint * 1000000000, 'succeeded', CASE WHEN g % 3 = 0 THEN 'draft' ELSE 'target' END,
			ARRAY[g % 10], '{"class":["1"],"mode":"target"}', '{"mode":"target","classes":[1]}' FROM generate_series(1, ` + fmt.Sprint(n) + `) AS g`,
		`INSERT INTO images (id, job_id, idx, class, class_name, seconds) SELECT md5(g::text) || '-0', md5(g::text), 0, 1, 'c', 0.1
			FROM generate_series(1, ` + fmt.Sprint(n) + `) AS g`,
		`ANALYZE jobs`, `ANALYZE images`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	mid := Cursor{Created: time.Unix(0, 1764000000000000000+int64(n/2)*1e9), ID: "x"}
	for name, q := range map[string]func() (string, []any){
		"first page":                 func() (string, []any) { return afterQuery(Filter{}, 21, Cursor{Created: time.Unix(0, 1<<62), ID: ""}) },
		"page 5,000 by cursor":       func() (string, []any) { return afterQuery(Filter{}, 21, mid) },
		"draft page 5,000 by cursor": func() (string, []any) { return afterQuery(Filter{Mode: "draft"}, 21, mid) },
		"a page's images": func() (string, []any) {
			return `SELECT ` + pgImageCols + ` FROM images WHERE job_id = ANY($1) ORDER BY job_id, idx`, []any{[]string{"a", "b"}}
		},
	} {
		sql, args := q()
		best := time.Hour
		for range 3 {
			var plan []map[string]any
			var raw []byte
			if err := conn.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+sql, args...).Scan(&raw); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := json.Unmarshal(raw, &plan); err != nil {
				t.Fatal(err)
			}
			ms := plan[0]["Execution Time"].(float64)
			best = min(best, time.Duration(ms*float64(time.Millisecond)))
		}
		t.Logf("%s at %d jobs: %v", name, n, best)
		if best > 5*time.Millisecond {
			t.Errorf("%s takes %v at %d jobs; want under 5 ms", name, best, n)
		}
	}
	start := time.Now()
	if _, total, err := p.List(Filter{}, 20, 0); err != nil || total != n {
		t.Fatalf("offset page: %d %v", total, err)
	}
	t.Logf("an offset page with its count at %d jobs: %v (the count is the unbounded part)", n, time.Since(start))
}
