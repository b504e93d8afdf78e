package loadtest

import (
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"marspec/api"
	"marspec/server/servertest"
)

func ptr[T any](v T) *T { return &v }

// The load driver against a server on the analytic models: every request done once, images
// counted, batch sizes read from /metrics.
func TestLoadDriverCountsEveryJobOnce(t *testing.T) {
	url := servertest.Start(t, "")
	c, err := api.NewClient(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	mix := Mix{Clients: 3, Requests: 7, Duration: time.Minute, MinImages: 1, MaxImages: 3, NumIter: ptr(3), Mode: "target", Seed: 5}
	res, err := Drive([]*api.Client{c}, mix, "on")
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 7 || res.Images < 7 || res.Images > 21 || res.EngineSteps == 0 || res.MeanBatch < 1 || res.StoppedEarly {
		t.Fatalf("%+v", res)
	}
	if !(res.P50 <= res.P95 && res.P95 <= res.P99) {
		t.Errorf("percentiles out of order: %+v", res)
	}
	list, err := c.List(t.Context(), api.ListOptions{Limit: 100})
	if err != nil || list.Total != 7+3 { // the mix and the warm-up burst of one request per client
		t.Fatalf("jobs on the server: %d, %v", list.Total, err)
	}
}

// With several --server addresses, requests go round-robin and the service's counters are
// the sum of the servers' own: two servers each finish their share, none is counted twice.
func TestLoadDriverSpreadsOverServers(t *testing.T) {
	var cs []*api.Client
	for range 2 {
		c, err := api.NewClient(servertest.Start(t, ""), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	mix := Mix{Clients: 2, Requests: 6, Duration: time.Minute, MinImages: 1, MaxImages: 2, NumIter: ptr(3), Mode: "target", Seed: 9}
	res, err := Drive(cs, mix, "on")
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 6 {
		t.Fatalf("%+v", res)
	}
	for i, c := range cs {
		list, err := c.List(t.Context(), api.ListOptions{Limit: 100})
		// each server: its half of the mix and one warm-up request
		if err != nil || list.Total != 3+1 {
			t.Fatalf("server %d holds %d jobs (%v), want its round-robin share 3 + 1 warm-up", i, list.Total, err)
		}
	}
}

func TestPercentile(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if percentile(v, 0.5) != 5 || percentile(v, 0.95) != 10 || percentile(v, 0.99) != 10 || !math.IsNaN(percentile(nil, 0.5)) {
		t.Error("nearest-rank percentiles")
	}
}

// A replica dies mid-pass (its address stops answering, its open streams cut): the driver
// goes on with the other, counts what failed by cause, and gives its verdict on the jobs it
// created, naming the ones it could no longer read.
func TestLoadDriverKeepsGoingWhenAReplicaDies(t *testing.T) {
	backend := servertest.Start(t, "")
	target, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	// The replica dies after its fifth POST, not after a fixed time: a fast machine would
	// finish all 40 requests before any timer fired.
	proxy := httputil.NewSingleHostReverseProxy(target)
	var posts atomic.Int32
	dying := make(chan struct{})
	doomed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && posts.Add(1) == 5 {
			close(dying)
		}
		proxy.ServeHTTP(w, r)
	}))
	a, _ := api.NewClient(doomed.URL, "", nil)
	b, _ := api.NewClient(servertest.Start(t, ""), "", nil)
	go func() {
		<-dying
		doomed.CloseClientConnections()
		doomed.Close()
	}()
	mix := Mix{Clients: 2, Requests: 40, Duration: time.Minute, MinImages: 2, MaxImages: 4, NumIter: ptr(3), Mode: "target", Seed: 3, GiveUp: time.Second}
	res, err := Drive([]*api.Client{a, b}, mix, "on")
	t.Logf("%d requests done; verdict: %s; failures: %v", res.Requests, res.Verdict, res.Failures)
	if res.Verdict == "" {
		t.Fatalf("no verdict: %v", err)
	}
	if res.Failures["POST unanswered by "+doomed.URL] == 0 {
		t.Errorf("the dead replica's refusals are not counted: %v", res.Failures)
	}
	if res.Requests < 20 {
		t.Errorf("only %d requests done: the driver did not go on with the live replica", res.Requests)
	}
	if lost := res.Failures["event stream cut on "+doomed.URL]; lost > 0 && (err == nil || !strings.HasPrefix(res.Verdict, "FAIL")) {
		t.Errorf("%d jobs lost with their replica, yet the verdict is %q (%v)", lost, res.Verdict, err)
	}
}

// Others using the service during a pass: the verdict on this pass's own jobs holds, and it
// says the servers counted more.
func TestLoadDriverSaysWhenOthersShareTheService(t *testing.T) {
	c, err := api.NewClient(servertest.Start(t, ""), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // someone else's jobs, one at a time
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = c.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"1"}, Mode: "draft"}, 10*time.Second)
		}
	}()
	mix := Mix{Clients: 2, Requests: 20, Duration: time.Minute, MinImages: 1, MaxImages: 2, NumIter: ptr(3), Mode: "target", Seed: 4}
	res, err := Drive([]*api.Client{c}, mix, "on")
	close(stop)
	wg.Wait()
	if err != nil || !strings.HasPrefix(res.Verdict, "PASS") || !strings.Contains(res.Verdict, "others share the service") {
		t.Fatalf("verdict %q, %v", res.Verdict, err)
	}
}
