package licence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
)

// clock is a settable clock for Manager tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func loadAt(t *testing.T, cfg config.Licence, now time.Time) (*Manager, *clock) {
	t.Helper()
	clk := &clock{t: now}
	m := New(cfg, nil, WithClock(clk.Now))
	m.Load(context.Background())
	return m, clk
}

func TestManagerStatus(t *testing.T) {
	ed, other := edKeyPair(t), edKeyPair(t)
	rs := rsaKeyPair(t, 2048)
	valid, err := Issue(ed.privPEM, goodClaims())
	if err != nil {
		t.Fatal(err)
	}
	validRSA, err := Issue(rs.privPEM, goodClaims())
	if err != nil {
		t.Fatal(err)
	}
	exp := goodClaims()
	exp.IssuedAt, exp.ExpiresAt = testNow.Add(-48*time.Hour), testNow.Add(-time.Hour)
	expired, err := Issue(ed.privPEM, exp)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	licFile, pubFile := filepath.Join(dir, "licence.jwt"), filepath.Join(dir, "pub.pem")
	if err := os.WriteFile(licFile, []byte(valid), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubFile, []byte(ed.pubPEM), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name        string
		cfg         config.Licence
		state       string
		reason      string
		message     string
		hasCustomer bool
	}{
		{name: "valid, text", cfg: config.Licence{Key: valid, PublicKey: ed.pubPEM}, state: StateValid, hasCustomer: true},
		{name: "valid, files", cfg: config.Licence{Key: licFile, PublicKey: pubFile}, state: StateValid, hasCustomer: true},
		{name: "valid RS256", cfg: config.Licence{Key: validRSA, PublicKey: rs.pubPEM}, state: StateValid, hasCustomer: true},
		{name: "nothing configured", cfg: config.Licence{}, state: StateRestricted, reason: ReasonMissing, message: "LICENSE_KEY"},
		{name: "blank key", cfg: config.Licence{Key: "  ", PublicKey: ed.pubPEM}, state: StateRestricted, reason: ReasonMissing},
		{name: "no public key", cfg: config.Licence{Key: valid}, state: StateRestricted, reason: ReasonInvalid, message: "LICENSE_PUBLIC_KEY) is not set"},
		{name: "public key file missing", cfg: config.Licence{Key: valid, PublicKey: filepath.Join(dir, "nope.pem")}, state: StateRestricted,
			reason: ReasonInvalid, message: "not a readable Ed25519 or RSA public key"},
		{name: "licence file missing", cfg: config.Licence{Key: filepath.Join(dir, "nope.jwt"), PublicKey: ed.pubPEM}, state: StateRestricted,
			reason: ReasonInvalid, message: "neither a licence nor a readable file"},
		{name: "wrong public key", cfg: config.Licence{Key: valid, PublicKey: other.pubPEM}, state: StateRestricted,
			reason: ReasonInvalid, message: "does not verify: token signature is invalid"},
		{name: "RSA key for an EdDSA licence", cfg: config.Licence{Key: valid, PublicKey: rs.pubPEM}, state: StateRestricted,
			reason: ReasonInvalid, message: "signing method EdDSA is invalid"},
		{name: "garbage", cfg: config.Licence{Key: "eyJhbGciOi.garbage.x", PublicKey: ed.pubPEM}, state: StateRestricted, reason: ReasonInvalid},
		{name: "expired", cfg: config.Licence{Key: expired, PublicKey: ed.pubPEM}, state: StateRestricted, reason: ReasonExpired,
			message: "expired on 2026-06-01T11:00:00Z", hasCustomer: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := loadAt(t, tt.cfg, testNow)
			st := m.Status()
			if st.State != tt.state || st.Reason != tt.reason || !strings.Contains(st.Message, tt.message) {
				t.Errorf("status %+v, want state %s reason %q message containing %q", st, tt.state, tt.reason, tt.message)
			}
			if (st.Customer == "Acme Plant 3") != tt.hasCustomer {
				t.Errorf("customer %q", st.Customer)
			}
			if strings.Contains(st.Message, dir) {
				t.Errorf("message %q shows a file path to clients", st.Message)
			}
			if b, _ := json.Marshal(st); strings.Contains(string(b), dir) || strings.Contains(string(b), "etail") {
				t.Errorf("JSON status %s carries the operator's detail", b)
			}
			if tt.name == "licence file missing" && !strings.Contains(st.Detail, filepath.Join(dir, "nope.jwt")) {
				t.Errorf("detail %q does not name the file", st.Detail)
			}
			if st.Features == nil {
				t.Error("features is nil; JSON clients expect a list")
			}
			if tt.state == StateValid {
				if st.MaxAgents != 25 || strings.Join(st.Features, ",") != "ai,export" || st.ExpiresAt == nil || st.Demo {
					t.Errorf("status %+v", st)
				}
			}
		})
	}
}

func TestManagerBeforeLoad(t *testing.T) {
	m := New(config.Licence{}, nil)
	if st := m.Status(); st.Valid() || st.Reason != ReasonMissing {
		t.Errorf("status before Load %+v", st)
	}
}

// TestManagerExpiresWhileRunning: expiry is judged at each check, so a
// licence that runs out turns the API restricted without a reload.
func TestManagerExpiresWhileRunning(t *testing.T) {
	ed := edKeyPair(t)
	c := goodClaims()
	c.ExpiresAt = testNow.Add(time.Hour)
	raw, err := Issue(ed.privPEM, c)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	clk := &clock{t: testNow}
	m := New(config.Licence{Key: raw, PublicKey: ed.pubPEM}, slog.New(slog.NewTextHandler(&logs, nil)), WithClock(clk.Now))
	m.Load(context.Background())
	if err := m.CheckRegistration(0); err != nil {
		t.Fatalf("CheckRegistration while valid: %v", err)
	}
	clk.Set(testNow.Add(time.Hour))
	st := m.Status()
	if st.State != StateRestricted || st.Reason != ReasonExpired {
		t.Fatalf("status after expiry %+v", st)
	}
	var le *Error
	if err := m.CheckRegistration(0); !errors.As(err, &le) || le.Code != CodeRestricted || le.Reason != ReasonExpired {
		t.Errorf("CheckRegistration after expiry = %v", err)
	}
	if err := m.CheckFeature(FeatureExport); !errors.As(err, &le) || le.Code != CodeRestricted {
		t.Errorf("CheckFeature after expiry = %v", err)
	}
	if n := strings.Count(logs.String(), "licence expired, running restricted"); n != 1 {
		t.Errorf("expiry warned %d times, want once:\n%s", n, logs.String())
	}
	// Loading the expired licence again is reported by the caller, not
	// warned of a second time.
	m.Load(context.Background())
	m.Status()
	if n := strings.Count(logs.String(), "licence expired"); n != 1 {
		t.Errorf("expiry warned %d times after a reload, want once", n)
	}
}

func TestCheckRegistration(t *testing.T) {
	ed := edKeyPair(t)
	licence := func(max int) string {
		c := goodClaims()
		c.MaxAgents = max
		raw, err := Issue(ed.privPEM, c)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	tests := []struct {
		name     string
		key      string
		agents   int
		wantCode string
	}{
		{"under the limit", licence(2), 1, ""},
		{"at the limit", licence(2), 2, CodeAgentLimit},
		{"over the limit", licence(2), 7, CodeAgentLimit},
		{"unlimited", licence(0), 1_000_000, ""},
		{"restricted", "", 0, CodeRestricted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := loadAt(t, config.Licence{Key: tt.key, PublicKey: ed.pubPEM}, testNow)
			err := m.CheckRegistration(tt.agents)
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("CheckRegistration(%d) = %v", tt.agents, err)
				}
				return
			}
			var le *Error
			if !errors.As(err, &le) || le.Code != tt.wantCode || le.Message == "" || le.HTTPStatus() != 403 {
				t.Fatalf("CheckRegistration(%d) = %#v, want code %s", tt.agents, err, tt.wantCode)
			}
			if tt.wantCode == CodeRestricted && le.Reason != ReasonMissing {
				t.Errorf("reason %q, want %s", le.Reason, ReasonMissing)
			}
		})
	}
}

func TestCheckFeature(t *testing.T) {
	ed := edKeyPair(t)
	raw, err := Issue(ed.privPEM, goodClaims()) // export and ai
	if err != nil {
		t.Fatal(err)
	}
	valid, _ := loadAt(t, config.Licence{Key: raw, PublicKey: ed.pubPEM}, testNow)
	restricted, _ := loadAt(t, config.Licence{}, testNow)
	tests := []struct {
		name     string
		m        *Manager
		feature  string
		wantCode string
		wantMsg  string
	}{
		{"granted", valid, FeatureExport, "", ""},
		{"granted ai", valid, FeatureAI, "", ""},
		{"not granted", valid, FeatureCorrelationRules, CodeFeatureMissing, "multi-metric correlation rules"},
		{"unknown", valid, "teleport", CodeFeatureMissing, `feature "teleport"`},
		{"restricted", restricted, FeatureExport, CodeRestricted, "CSV and Parquet export needs a licence"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.m.CheckFeature(tt.feature)
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("CheckFeature(%s) = %v", tt.feature, err)
				}
				return
			}
			var le *Error
			if !errors.As(err, &le) || le.Code != tt.wantCode || !strings.Contains(le.Message, tt.wantMsg) {
				t.Fatalf("CheckFeature(%s) = %v, want code %s with %q", tt.feature, err, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

// TestManagerReload: Load reads the files again, so a replaced licence
// takes effect on refresh, and concurrent readers never see a torn state.
func TestManagerReload(t *testing.T) {
	ed := edKeyPair(t)
	dir := t.TempDir()
	licFile := filepath.Join(dir, "licence.jwt")
	m, _ := loadAt(t, config.Licence{Key: licFile, PublicKey: ed.pubPEM}, testNow)
	if st := m.Status(); st.Reason != ReasonInvalid {
		t.Fatalf("status with no file %+v", st)
	}
	c := goodClaims()
	c.MaxAgents = 3
	raw, err := Issue(ed.privPEM, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(licFile, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				st := m.Status()
				if st.Valid() && st.MaxAgents != 3 {
					t.Errorf("torn status %+v", st)
					return
				}
				_ = m.CheckRegistration(1)
			}
		})
	}
	for range 20 {
		m.Load(context.Background())
	}
	wg.Wait()
	if st := m.Status(); !st.Valid() || st.MaxAgents != 3 {
		t.Errorf("status after reload %+v", st)
	}
}
