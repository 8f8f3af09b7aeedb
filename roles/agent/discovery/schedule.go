package discovery

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// MaxJitter caps the random delay added to each scheduled run, which is
// up to a tenth of the rule's interval: agents of a fleet started
// together do not all scan at the same moment.
const MaxJitter = 5 * time.Minute

// jitter is a random delay in [0, min(interval/10, MaxJitter)].
func jitter(interval time.Duration) time.Duration {
	hi := min(interval/10, MaxJitter)
	if hi <= 0 {
		return 0
	}
	return rand.N(hi + 1)
}

// scheduler runs the enabled rules every interval_seconds: a rule's
// next run is its last start plus the interval plus jitter; a rule that
// never ran (or whose time passed while the agent was off) runs after
// the jitter alone.
type scheduler struct {
	s    *Service
	kick chan struct{}
	// next is each enabled rule's next run; interval tells a changed
	// interval apart.
	next     map[string]time.Time
	interval map[string]int
}

func newScheduler(s *Service) *scheduler {
	return &scheduler{s: s, kick: make(chan struct{}, 1), next: map[string]time.Time{}, interval: map[string]int{}}
}

// changed makes the loop read the rules again.
func (c *scheduler) changed() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// retryAfter is how long the loop waits to read the rules again when the
// store could not be read.
const retryAfter = 30 * time.Second

func (c *scheduler) loop(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		wait := c.plan(ctx)
		now := c.s.now()
		var due []string
		for id, at := range c.next {
			if !at.After(now) {
				due = append(due, id)
			}
		}
		for _, id := range due {
			iv := time.Duration(c.interval[id]) * time.Second
			// The next run counts from this start; a run that is late
			// or refused waits a whole interval.
			c.next[id] = now.Add(iv + jitter(iv))
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.runOne(ctx, id)
			}()
		}
		if len(due) > 0 {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-c.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// plan reads the enabled rules into next and returns how long to sleep.
func (c *scheduler) plan(ctx context.Context) time.Duration {
	if !c.s.enabled() {
		clear(c.next)
		return retryAfter
	}
	st, err := c.s.store()
	if err != nil {
		return retryAfter
	}
	rules, err := st.Rules(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.s.log.Warn("discovery rules not read; retrying", "err", err)
		}
		return retryAfter
	}
	now := c.s.now()
	live := map[string]bool{}
	for _, r := range rules {
		if !r.Enabled {
			continue
		}
		live[r.UUID] = true
		if _, ok := c.next[r.UUID]; ok && c.interval[r.UUID] == r.IntervalSeconds {
			continue
		}
		iv := time.Duration(r.IntervalSeconds) * time.Second
		at := now.Add(jitter(iv))
		if runs, err := st.Runs(ctx, r.UUID, 1); err == nil && len(runs) > 0 {
			if last := runs[0].StartedAt.Add(iv + jitter(iv)); last.After(at) {
				at = last
			}
		}
		c.next[r.UUID], c.interval[r.UUID] = at, r.IntervalSeconds
	}
	wait := retryAfter * 10
	for id, at := range c.next {
		if !live[id] {
			delete(c.next, id)
			delete(c.interval, id)
			continue
		}
		wait = min(wait, max(at.Sub(now), 0))
	}
	return wait
}

// runOne runs rule id if it is still there, enabled and the feature on.
func (c *scheduler) runOne(ctx context.Context, id string) {
	if !c.s.enabled() {
		return
	}
	st, err := c.s.store()
	if err != nil {
		return
	}
	r, ok, err := st.Rule(ctx, id)
	if err != nil || !ok || !r.Enabled {
		return
	}
	if _, err := c.s.runRule(ctx, st, r); err != nil && ctx.Err() == nil {
		c.s.log.Warn("scheduled discovery run not done", "rule", r.Name, "err", err)
	}
}
