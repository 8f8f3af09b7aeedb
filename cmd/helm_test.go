package cmd

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
)

// chartDir is the Helm chart under test.
var chartDir = filepath.Join("..", "dist", "helm", "edgeplat")

// manifest is one rendered Kubernetes object, as generic YAML.
type manifest = map[string]any

func kindOf(m manifest) string { return str(m["kind"]) }
func nameOf(m manifest) string { return str(dig(m, "metadata", "name")) }

// dig walks maps by key and lists by int index; nil when a step is missing.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any) string { s, _ := v.(string); return s }

// helm finds the helm binary: .ci/run installs it (need_helm).
func helm(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("helm")
	if err != nil {
		coretest.Unavailable(t, "helm", "PATH", err)
	}
	return bin
}

// helmTemplate renders the chart with extra `helm template` arguments.
func helmTemplate(t *testing.T, bin string, args ...string) ([]manifest, error) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"template", "rel", chartDir, "--namespace", "plant"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New(err.Error() + ": " + stderr.String())
	}
	var docs []manifest
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var m manifest
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("parse rendered manifests: %v\n%s", err, out)
		}
		if m != nil {
			docs = append(docs, m)
		}
	}
	return docs, nil
}

func mustTemplate(t *testing.T, bin string, args ...string) []manifest {
	t.Helper()
	docs, err := helmTemplate(t, bin, args...)
	if err != nil {
		t.Fatalf("helm template %v: %v", args, err)
	}
	return docs
}

// byKind indexes rendered objects as "Kind/name".
func byKind(docs []manifest) map[string]manifest {
	out := map[string]manifest{}
	for _, d := range docs {
		out[kindOf(d)+"/"+nameOf(d)] = d
	}
	return out
}

// TestHelmChartIntegration runs helm lint and helm template on
// dist/helm/edgeplat and checks what Kubernetes would get: serve-api as a
// StatefulSet and ingest as a Deployment, both with /health probes, non-root and read-only, every secret
// setting read from a Secret (never inlined), only environment variables
// the role reads, and an HPA on the lag metric ingest exports.
func TestHelmChartIntegration(t *testing.T) {
	bin := helm(t)
	for _, args := range [][]string{nil, {"--set", "ingest.autoscaling.enabled=false", "--set", "ingest.keda.enabled=true"}} {
		if out, err := exec.Command(bin, append([]string{"lint", "--strict", chartDir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("helm lint --strict %v: %v\n%s", args, err, out)
		}
	}

	docs := mustTemplate(t, bin)
	objs := byKind(docs)
	const api, ingest, secret = "StatefulSet/rel-edgeplat-api", "Deployment/rel-edgeplat-ingest", "Secret/rel-edgeplat"
	for _, want := range []string{api, ingest, secret, "Service/rel-edgeplat-api", "Service/rel-edgeplat-api-headless", "Service/rel-edgeplat-ingest",
		"PodDisruptionBudget/rel-edgeplat-api", "PodDisruptionBudget/rel-edgeplat-ingest",
		"HorizontalPodAutoscaler/rel-edgeplat-ingest", "ServiceAccount/rel-edgeplat"} {
		if objs[want] == nil {
			t.Errorf("rendered chart lacks %s", want)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	secretEnv := map[string]bool{}
	for _, k := range config.Keys {
		if k.Secret && k.Env != "" {
			secretEnv[k.Env] = true
		}
	}
	for _, tt := range []struct{ obj, role string }{{api, config.RoleAPI}, {ingest, config.RoleIngest}} {
		t.Run(tt.role, func(t *testing.T) {
			d := objs[tt.obj]
			pod := dig(d, "spec", "template", "spec")
			c := dig(pod, "containers", 0)
			if args, _ := dig(c, "args").([]any); len(args) != 1 || args[0] != tt.role {
				t.Errorf("args = %v, want [%s]", dig(c, "args"), tt.role)
			}
			for _, probe := range []string{"readinessProbe", "livenessProbe"} {
				if p := dig(c, probe, "httpGet", "path"); p != "/health" || dig(c, probe, "httpGet", "port") != "http" {
					t.Errorf("%s = %v, want GET /health on port http", probe, dig(c, probe))
				}
			}
			if dig(c, "ports", 0, "name") != "http" {
				t.Errorf("ports = %v", dig(c, "ports"))
			}
			if dig(pod, "securityContext", "runAsNonRoot") != true || dig(pod, "securityContext", "runAsUser") != 65532 {
				t.Errorf("pod securityContext = %v, want runAsNonRoot as 65532", dig(pod, "securityContext"))
			}
			if dig(c, "securityContext", "allowPrivilegeEscalation") != false || dig(c, "securityContext", "readOnlyRootFilesystem") != true ||
				dig(c, "securityContext", "capabilities", "drop", 0) != "ALL" {
				t.Errorf("container securityContext = %v", dig(c, "securityContext"))
			}
			if dig(pod, "enableServiceLinks") != false {
				t.Error("enableServiceLinks is not false: service links put EDGEPLAT_* variables into the environment")
			}
			mounts := map[string]bool{}
			for _, m := range asList(dig(c, "volumeMounts")) {
				mounts[str(dig(m, "mountPath"))] = true
			}
			if !mounts["/tmp"] || !mounts["/var/lib/edgeplat/spool"] {
				t.Errorf("volume mounts %v: a read-only root needs writable /tmp and spool", mounts)
			}

			read := map[string]bool{}
			for _, k := range config.Keys {
				for _, env := range k.EnvFor(tt.role) {
					read[env] = true
				}
			}
			seen := map[string]bool{}
			for _, e := range asList(dig(c, "env")) {
				name := str(dig(e, "name"))
				seen[name] = true
				if !read[name] {
					t.Errorf("env %s is not read by %s", name, tt.role)
				}
				if secretEnv[name] {
					if _, inlined := e.(map[string]any)["value"]; inlined || dig(e, "valueFrom", "secretKeyRef", "name") != "rel-edgeplat" {
						t.Errorf("env %s = %v, want a secretKeyRef to rel-edgeplat", name, e)
					}
				}
			}
			for _, want := range []string{"DB_HOST", "DB_PASSWORD", "STREAMSTORE_HOST", "PORT"} {
				if !seen[want] {
					t.Errorf("env lacks %s", want)
				}
			}
			if tt.role == config.RoleAPI {
				for _, want := range []string{"JWT_SECRET", "LICENSE_KEY", "MQTT_BROKER_URL", "MQTT_SHARED_SUBSCRIPTION_GROUP"} {
					if !seen[want] {
						t.Errorf("env lacks %s", want)
					}
				}
			}

			pdb := objs["PodDisruptionBudget/"+nameOf(d)]
			podLabels, _ := dig(d, "spec", "template", "metadata", "labels").(map[string]any)
			sel, _ := dig(pdb, "spec", "selector", "matchLabels").(map[string]any)
			if len(sel) == 0 {
				t.Errorf("PDB %s has no selector", nameOf(d))
			}
			for k, v := range sel {
				if podLabels[k] != v {
					t.Errorf("PDB selector %s=%v does not match the pods' labels %v", k, v, podLabels)
				}
			}
		})
	}

	// The HPA owns ingest's replica count and reads the lag metric ingest exports.
	hpa := objs["HorizontalPodAutoscaler/rel-edgeplat-ingest"]
	if dig(hpa, "spec", "scaleTargetRef", "name") != "rel-edgeplat-ingest" || dig(hpa, "spec", "scaleTargetRef", "kind") != "Deployment" {
		t.Errorf("HPA target = %v", dig(hpa, "spec", "scaleTargetRef"))
	}
	metric := str(dig(hpa, "spec", "metrics", 0, "pods", "metric", "name"))
	docsMetrics, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	if metric == "" || !bytes.Contains(docsMetrics, []byte("`"+metric+"`")) {
		t.Errorf("HPA metric %q is not a metric docs/metrics.md lists", metric)
	}
	if _, fixed := dig(objs[ingest], "spec").(map[string]any)["replicas"]; fixed {
		t.Error("ingest Deployment sets replicas while the HPA scales it")
	}
	if dig(objs[api], "spec", "replicas") != 2 {
		t.Errorf("api replicas = %v, want 2", dig(objs[api], "spec", "replicas"))
	}
	// serve-api's pods keep their names, so their MQTT client ids and
	// broker sessions, through a headless governing Service, and have the
	// time to leave the shared group when they stop.
	headless := objs["Service/rel-edgeplat-api-headless"]
	if dig(objs[api], "spec", "serviceName") != nameOf(headless) || dig(headless, "spec", "clusterIP") != "None" {
		t.Errorf("api serviceName = %v, headless Service spec = %v", dig(objs[api], "spec", "serviceName"), dig(headless, "spec"))
	}
	if g, _ := dig(objs[api], "spec", "template", "spec", "terminationGracePeriodSeconds").(int); g <= 10 {
		t.Errorf("api terminationGracePeriodSeconds = %v, want more than lifecycle.shutdown_grace (10 s)",
			dig(objs[api], "spec", "template", "spec", "terminationGracePeriodSeconds"))
	}
	podLabels, _ := dig(objs[api], "spec", "template", "metadata", "labels").(map[string]any)
	sel, _ := dig(headless, "spec", "selector").(map[string]any)
	if len(sel) == 0 {
		t.Error("headless Service has no selector")
	}
	for k, v := range sel {
		if podLabels[k] != v {
			t.Errorf("headless Service selector %s=%v does not match the api pods' labels %v", k, v, podLabels)
		}
	}

	// A generated JWT key is long enough for jwt.secret's validation.
	if jwt, _ := base64.StdEncoding.DecodeString(str(dig(objs[secret], "data", "jwt-secret"))); len(jwt) < 32 {
		t.Errorf("generated jwt-secret has %d bytes, want >= 32", len(jwt))
	}
}

// TestHelmChartSecretsIntegration: secret values given to the chart land
// in its Secret only, never in a Deployment; with existingSecret no
// Secret is made and the pods read the named one. The environment the
// chart gives each role passes that role's own validation with no warning.
func TestHelmChartSecretsIntegration(t *testing.T) {
	bin := helm(t)
	secrets := map[string]string{
		"secrets.jwtSecret":   "jwt-sentinel-0123456789abcdefghijklmnopq",
		"postgresql.password": "db-sentinel-pw",
		"secrets.licenceKey":  "licence-sentinel",
		"redis.password":      "redis-sentinel",
		"mqtt.password":       "mqtt-sentinel",
	}
	var args []string
	for k, v := range secrets {
		args = append(args, "--set", k+"="+v)
	}
	docs := mustTemplate(t, bin, args...)
	objs := byKind(docs)
	sec := objs["Secret/rel-edgeplat"]
	data := map[string]string{}
	for k, v := range dig(sec, "data").(map[string]any) {
		b, err := base64.StdEncoding.DecodeString(str(v))
		if err != nil {
			t.Fatalf("secret key %s: %v", k, err)
		}
		data[k] = string(b)
	}
	for _, key := range []string{"jwt-secret", "db-password", "licence-key", "streamstore-password", "mqtt-password"} {
		if data[key] == "" {
			t.Errorf("Secret lacks %s: %v", key, slices.Sorted(maps.Keys(data)))
		}
	}
	for _, d := range docs {
		if kindOf(d) == "Secret" {
			continue
		}
		out, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range secrets {
			if bytes.Contains(out, []byte(v)) || bytes.Contains(out, []byte(base64.StdEncoding.EncodeToString([]byte(v)))) {
				t.Errorf("%s/%s contains the secret value %q", kindOf(d), nameOf(d), v)
			}
		}
	}

	// Each role validates the environment the chart gives it, secrets
	// resolved from the rendered Secret, and warns about nothing.
	for _, tt := range []struct{ obj, role string }{{"StatefulSet/rel-edgeplat-api", config.RoleAPI}, {"Deployment/rel-edgeplat-ingest", config.RoleIngest}} {
		t.Run(tt.role, func(t *testing.T) {
			clearEnv(t)
			c := dig(objs[tt.obj], "spec", "template", "spec", "containers", 0)
			for _, e := range asList(dig(c, "env")) {
				name, value := str(dig(e, "name")), str(dig(e, "value"))
				if key := str(dig(e, "valueFrom", "secretKeyRef", "key")); key != "" {
					value = data[key]
				}
				t.Setenv(name, value)
			}
			code, out, errOut := run(t, tt.role, "--print-config")
			if code != 0 || errOut != "" {
				t.Errorf("%s --print-config with the chart's environment = %d, stderr:\n%s", tt.role, code, errOut)
			}
			if strings.Contains(out, secrets["postgresql.password"]) {
				t.Errorf("--print-config shows the database password:\n%s", out)
			}
		})
	}

	// existingSecret: no Secret rendered, every reference names it.
	docs = mustTemplate(t, bin, "--set", "secrets.existingSecret=plant-secrets")
	for _, d := range docs {
		if kindOf(d) == "Secret" {
			t.Errorf("existingSecret set, yet the chart renders Secret %s", nameOf(d))
		}
		if kindOf(d) != "Deployment" && kindOf(d) != "StatefulSet" {
			continue
		}
		for _, e := range asList(dig(d, "spec", "template", "spec", "containers", 0, "env")) {
			if ref := dig(e, "valueFrom", "secretKeyRef", "name"); ref != nil && ref != "plant-secrets" {
				t.Errorf("%s env %v reads Secret %v, want plant-secrets", nameOf(d), dig(e, "name"), ref)
			}
		}
	}
}

// TestHelmChartKEDAIntegration: the KEDA alternative replaces the HPA,
// scales the ingest Deployment on the lag of this namespace, and cannot
// be enabled together with the HPA.
func TestHelmChartKEDAIntegration(t *testing.T) {
	bin := helm(t)
	objs := byKind(mustTemplate(t, bin, "--set", "ingest.autoscaling.enabled=false", "--set", "ingest.keda.enabled=true"))
	so := objs["ScaledObject/rel-edgeplat-ingest"]
	if so == nil {
		t.Fatalf("no ScaledObject rendered: %v", slices.Sorted(maps.Keys(objs)))
	}
	if objs["HorizontalPodAutoscaler/rel-edgeplat-ingest"] != nil {
		t.Error("HPA rendered beside the ScaledObject")
	}
	if dig(so, "spec", "scaleTargetRef", "name") != "rel-edgeplat-ingest" || dig(so, "spec", "triggers", 0, "type") != "prometheus" {
		t.Errorf("ScaledObject spec = %v", dig(so, "spec"))
	}
	if q := str(dig(so, "spec", "triggers", 0, "metadata", "query")); q != `max(edgeplat_ingestion_worker_lag_seconds{namespace="plant"})` {
		t.Errorf("KEDA query = %q", q)
	}
	if _, err := helmTemplate(t, bin, "--set", "ingest.keda.enabled=true"); err == nil || !strings.Contains(err.Error(), "exclusive") {
		t.Errorf("HPA and KEDA together rendered (err %v), want a failure saying they are exclusive", err)
	}
}

func asList(v any) []any { l, _ := v.([]any); return l }
