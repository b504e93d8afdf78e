// Package k8s holds the Kubernetes manifests of marspec; this test is their schema check.
// No cluster or schema download is reachable here, so each manifest is decoded strictly
// into the Kubernetes API's own Go types (an unknown or misspelt field, or a wrong type,
// fails), then checked against what the binary expects of it.
package k8s

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

type manifests struct {
	deployments []appsv1.Deployment
	services    []corev1.Service
	secrets     []corev1.Secret
	hpas        []autoscalingv2.HorizontalPodAutoscaler
	jobs        []batchv1.Job
}

// load decodes every manifest of the folder strictly by its kind.
func load(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	var m manifests
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var head struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(data, &head); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		strict := func(v any) {
			if err := yaml.UnmarshalStrict(data, v); err != nil {
				t.Fatalf("%s (%s %s): %v", f, head.APIVersion, head.Kind, err)
			}
		}
		switch head.APIVersion + " " + head.Kind {
		case "apps/v1 Deployment":
			var d appsv1.Deployment
			strict(&d)
			m.deployments = append(m.deployments, d)
		case "v1 Service":
			var s corev1.Service
			strict(&s)
			m.services = append(m.services, s)
		case "v1 Secret":
			var s corev1.Secret
			strict(&s)
			m.secrets = append(m.secrets, s)
		case "autoscaling/v2 HorizontalPodAutoscaler":
			var h autoscalingv2.HorizontalPodAutoscaler
			strict(&h)
			m.hpas = append(m.hpas, h)
		case "batch/v1 Job":
			var j batchv1.Job
			strict(&j)
			m.jobs = append(m.jobs, j)
		default:
			t.Fatalf("%s: kind %s %s is not one this test checks", f, head.APIVersion, head.Kind)
		}
	}
	return m
}

// flagValue is the value after --name in args ("" if absent).
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func TestManifestsDecodeStrictly(t *testing.T) {
	m := load(t)
	if len(m.deployments) != 2 || len(m.services) != 1 || len(m.secrets) != 1 || len(m.hpas) != 1 || len(m.jobs) != 2 {
		t.Fatalf("manifests: %d deployments, %d services, %d secrets, %d autoscalers, %d jobs",
			len(m.deployments), len(m.services), len(m.secrets), len(m.hpas), len(m.jobs))
	}
}

func TestDeploymentsFitTheBinary(t *testing.T) {
	m := load(t)
	secret := m.secrets[0]
	gpu := 0
	for _, d := range m.deployments {
		spec := d.Spec.Template.Spec
		c := spec.Containers[0]
		if len(c.Args) == 0 || c.Args[0] != "serve" {
			t.Errorf("%s: runs %q, want marspec serve", d.Name, c.Args)
		}
		drain, err := time.ParseDuration(flagValue(c.Args, "drain"))
		if err != nil {
			t.Errorf("%s: --drain: %v", d.Name, err)
		}
		// the kubelet's SIGKILL must come after the drain, or running jobs are cut off
		if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= drain {
			t.Errorf("%s: terminationGracePeriodSeconds missing or not above --drain %v", d.Name, drain)
		}
		if addr := flagValue(c.Args, "addr"); !strings.HasPrefix(addr, "0.0.0.0:") {
			t.Errorf("%s: --addr %q does not listen on the pod's address", d.Name, addr)
		}
		for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz", c.StartupProbe: "/healthz"} {
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.String() != "http" {
				t.Errorf("%s: a probe is missing or does not ask %s on the http port", d.Name, want)
			}
		}
		env := map[string]bool{}
		for _, e := range c.Env {
			env[e.Name] = true
			if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
				if _, ok := secret.StringData[ref.SecretKeyRef.Key]; !ok || ref.SecretKeyRef.Name != secret.Name {
					t.Errorf("%s: %s reads secret %s key %q, which the Secret does not have", d.Name, e.Name, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key)
				}
			}
		}
		for _, want := range []string{"MARSPEC_TOKEN", "MARSPEC_STORE", "MARSPEC_BLOBS", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
			if !env[want] {
				t.Errorf("%s: no %s", d.Name, want)
			}
		}
		if !strings.HasPrefix(secret.StringData["store"], "postgres://") || !strings.HasPrefix(secret.StringData["blobs"], "s3://") {
			t.Errorf("replicas need a shared store and blobs: %q, %q", secret.StringData["store"], secret.StringData["blobs"])
		}
		if _, ok := c.Resources.Limits["nvidia.com/gpu"]; ok {
			gpu++
			if flagValue(c.Args, "device") != "cuda" {
				t.Errorf("%s asks for a GPU but runs --device %q", d.Name, flagValue(c.Args, "device"))
			}
		}
		selected := false
		for _, s := range m.services {
			match := true
			for k, v := range s.Spec.Selector {
				match = match && d.Spec.Template.Labels[k] == v
			}
			selected = selected || match
		}
		if !selected {
			t.Errorf("%s: no Service selects its pods", d.Name)
		}
	}
	if gpu != 1 {
		t.Errorf("%d GPU deployments, want the one GPU variant", gpu)
	}
	h := m.hpas[0]
	if h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != m.deployments[0].Name && h.Spec.ScaleTargetRef.Name != m.deployments[1].Name {
		t.Errorf("the autoscaler scales %s %s, not a Deployment here", h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name)
	}
}

// The scoring Job's shards cover every chunk once: an Indexed Job with as many completions
// as --shard i/N has shards, each index into its own folder, merged by the second Job.
func TestScoringJobsShardAndMerge(t *testing.T) {
	m := load(t)
	var run, merge *batchv1.Job
	for i := range m.jobs {
		if strings.Contains(strings.Join(m.jobs[i].Spec.Template.Spec.Containers[0].Args, " "), "eval merge") {
			merge = &m.jobs[i]
		} else {
			run = &m.jobs[i]
		}
	}
	if run == nil || merge == nil {
		t.Fatal("want a scoring Job and a merge Job")
	}
	if run.Spec.CompletionMode == nil || *run.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Fatal("the scoring Job is not Indexed")
	}
	cmd := strings.Join(run.Spec.Template.Spec.Containers[0].Args, " ")
	shard := regexp.MustCompile(`--shard \$JOB_COMPLETION_INDEX/([0-9]+)`).FindStringSubmatch(cmd)
	if shard == nil || !strings.Contains(cmd, "shard-$JOB_COMPLETION_INDEX") {
		t.Fatalf("the scoring Job does not shard by its index into its own folder: %s", cmd)
	}
	if n, _ := strconv.Atoi(shard[1]); run.Spec.Completions == nil || int(*run.Spec.Completions) != n {
		t.Errorf("--shard i/%s with %v completions", shard[1], run.Spec.Completions)
	}
	mergeCmd := strings.Join(merge.Spec.Template.Spec.Containers[0].Args, " ")
	for _, flag := range []string{"--evaluator", "--reference"} {
		if flagIn(cmd, flag) != flagIn(mergeCmd, flag) {
			t.Errorf("merge uses %s %q, the run %q: the report must score with the run's", flag, flagIn(mergeCmd, flag), flagIn(cmd, flag))
		}
	}
}

func flagIn(cmd, flag string) string {
	return flagValue(strings.Fields(cmd), strings.TrimPrefix(flag, "--"))
}
