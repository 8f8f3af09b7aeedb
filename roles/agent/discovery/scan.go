package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Limits of a scan (docs/discovery.md, section Limits).
const (
	// MaxScanDuration bounds one scan, all its protocols together; what
	// was found by then is answered, with the limit named as an error.
	MaxScanDuration = 2 * time.Minute
	// RecentWindow: POST /v1/discover of the same protocols within this
	// long of the previous one answers 409 unless forceRun is set.
	RecentWindow = 30 * time.Second
)

// Request is the body of POST /v1/discover.
type Request struct {
	// Protocols to scan; empty scans the protocols of the configured
	// endpoints.
	Protocols []string `json:"protocols"`
	Validate  bool     `json:"validate"`
	ForceRun  bool     `json:"forceRun"`
	// Overrides are each protocol's scan options.
	Overrides map[string]json.RawMessage `json:"overrides"`
}

// Result is what a scan found. Errors names, per protocol, a scan that
// failed or stopped early; the other protocols' devices are still there.
type Result struct {
	Devices []Device          `json:"devices"`
	Errors  map[string]string `json:"errors,omitempty"`
}

// Endpoints are the agent's configured endpoints, as far as discovery
// needs them.
type Endpoints interface {
	// Connections are the connection objects of the stored endpoints,
	// by protocol.
	Connections(ctx context.Context) (map[string][]json.RawMessage, error)
	// Create creates an endpoint from def, an endpoint object as
	// POST /v1/endpoints takes it, the same way, validation included.
	Create(ctx context.Context, def json.RawMessage) (uuid string, err error)
	// CheckTemplate checks an endpoint template (target_json) as far as
	// it can without a device: its keys and their types.
	CheckTemplate(def json.RawMessage) error
}

// plan checks the options of each protocol and plans its scan; field
// names the options of a protocol in errors ("overrides.modbus").
func (s *Service) plan(protocols []string, options map[string]json.RawMessage, known map[string][]json.RawMessage,
	field func(protocol string) string) (map[string]Plan, error) {
	var errs []error
	plans := map[string]Plan{}
	for _, p := range protocols {
		sc, ok := s.scanners[p]
		if !ok {
			continue // checked by the caller
		}
		pl, err := sc.Plan(options[p], known[p])
		if err != nil {
			errs = append(errs, prefixFields(field(p), err))
			continue
		}
		plans[p] = pl
	}
	return plans, errors.Join(errs...)
}

// unknownProtocol names a protocol no scanner is registered for.
func (s *Service) unknownProtocol(field, p string) error {
	if p == "bacnet" {
		return adapters.Fieldf(field, "bacnet has no scanner in this build; its scanner (Who-Is) comes with the BACnet adapter")
	}
	return adapters.Fieldf(field, "unknown protocol %q; scanners: %s", p, strings.Join(s.scanners.Protocols(), ", "))
}

// runPlans runs the plans together, bounded by MaxScanDuration, and validates
// what they found when validate is set.
func runPlans(ctx context.Context, plans map[string]Plan, validate bool) Result {
	ctx, cancel := context.WithTimeout(ctx, MaxScanDuration)
	defer cancel()
	res := Result{Devices: []Device{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p, pl := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			devs, err := pl.Scan(ctx)
			if validate && len(devs) > 0 && ctx.Err() == nil {
				pl.Validate(ctx, devs)
			}
			mu.Lock()
			defer mu.Unlock()
			res.Devices = append(res.Devices, devs...)
			if err != nil {
				if res.Errors == nil {
					res.Errors = map[string]string{}
				}
				if errors.Is(err, context.DeadlineExceeded) {
					err = fmt.Errorf("stopped at the %v limit of a scan; the devices found by then are listed", MaxScanDuration)
				}
				res.Errors[p] = err.Error()
			}
		}()
	}
	wg.Wait()
	slices.SortStableFunc(res.Devices, func(a, b Device) int { return strings.Compare(a.Protocol, b.Protocol) })
	return res
}

// Discover runs POST /v1/discover: nothing is stored.
func (s *Service) Discover(ctx context.Context, req Request) (Result, error) {
	if !s.enabled() {
		return Result{}, ErrDisabled
	}
	known, err := s.endpoints.Connections(ctx)
	if err != nil {
		return Result{}, err
	}
	protocols := req.Protocols
	if len(protocols) == 0 {
		for p := range known {
			if _, ok := s.scanners[p]; ok {
				protocols = append(protocols, p)
			}
		}
		if len(protocols) == 0 {
			return Result{}, invalid(adapters.Fieldf("protocols", "is required: no endpoint is configured whose protocol to scan (scanners: %s)",
				strings.Join(s.scanners.Protocols(), ", ")))
		}
	}
	var errs []error
	for i, p := range protocols {
		if _, ok := s.scanners[p]; !ok {
			errs = append(errs, s.unknownProtocol(fmt.Sprintf("protocols[%d]", i), p))
		}
	}
	for p := range req.Overrides {
		if !slices.Contains(protocols, p) {
			errs = append(errs, adapters.Fieldf("overrides."+p, "options of a protocol that is not scanned (protocols: %s)", strings.Join(protocols, ", ")))
		}
	}
	if len(errs) > 0 {
		return Result{}, invalid(errors.Join(errs...))
	}
	protocols = sortUniq(protocols)
	plans, err := s.plan(protocols, req.Overrides, known, func(p string) string { return "overrides." + p })
	if err != nil {
		return Result{}, invalid(err)
	}
	key := strings.Join(protocols, ",")
	release, err := s.recent.begin(key, req.ForceRun, s.now())
	if err != nil {
		return Result{}, err
	}
	defer release()
	return runPlans(ctx, plans, req.Validate), nil
}

// recentScans is the recent-run guard of POST /v1/discover.
type recentScans struct {
	mu      sync.Mutex
	started map[string]time.Time
	running map[string]bool
}

// begin refuses a scan of key while one runs, or within RecentWindow of
// the last unless force; release ends it.
func (r *recentScans) begin(key string, force bool, now time.Time) (release func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started == nil {
		r.started, r.running = map[string]time.Time{}, map[string]bool{}
	}
	if r.running[key] {
		return nil, &ConflictError{Msg: fmt.Sprintf("a scan of %s is running; wait for it (forceRun does not start a second one)", key)}
	}
	if last, ok := r.started[key]; ok && !force && now.Sub(last) < RecentWindow {
		return nil, &ConflictError{Msg: fmt.Sprintf("a scan of %s started %v ago; scans of the same protocols are %v apart unless forceRun is true",
			key, now.Sub(last).Round(time.Second), RecentWindow)}
	}
	r.started[key], r.running[key] = now, true
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.running, key)
	}, nil
}
