package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"modernc.org/sqlite"

	"github.com/edgeplat/edgeplat/core/db"
)

// SQLite's primary result codes this file tells apart.
const (
	sqliteCorrupt = 11
	sqliteFull    = 13
	sqliteNotADB  = 26
)

// IsFull reports whether err is SQLite's "database or disk is full"
// (SQLITE_FULL, which a full file system or max_page_count gives) or a
// bare ENOSPC.
func IsFull(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqliteFull {
		return true
	}
	return errors.Is(err, syscall.ENOSPC)
}

// IsCorrupt reports whether err says the database file is damaged
// (SQLITE_CORRUPT, "database disk image is malformed") or is not a
// database at all (SQLITE_NOTADB, a destroyed header).
func IsCorrupt(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteCorrupt, sqliteNotADB:
			return true
		}
	}
	return false
}

// fullLogEvery bounds the warnings about a full disk: every write of an
// outage would log otherwise.
const fullLogEvery = time.Minute

// condition is what the store knows of its own health besides answering
// a ping: a full disk and a corruption found while running.
//
// The store and its table groups share one condition, so whichever of
// them meets a full disk or a damaged file first reports it.
type condition struct {
	db   *db.DB
	path string
	log  *slog.Logger
	// recovery is set when Open replaced a corrupt file.
	recovery *Recovery

	mu         sync.Mutex
	full       error // the last SQLITE_FULL; nil once a write went through
	fullSince  time.Time
	fullLogged time.Time
	fullFailed int64 // failed writes since the last warning
	corrupt    string

	checking  atomic.Bool
	onCorrupt atomic.Pointer[func(reason string)]

	// The background quick check runs under ctx, which Close cancels
	// before it waits on checks: a check must not outlive the store or run
	// against a closed database. closed (under mu) stops new checks, so
	// no Add races Close's Wait.
	ctx    context.Context
	cancel context.CancelFunc
	checks sync.WaitGroup
	closed bool
	// check replaces the quick check in tests; nil runs quickCheck.
	check func(context.Context) (string, error)
}

// quickCheckTimeout bounds the check that confirms a corruption; a large
// store on a slow SD card may need it all.
const quickCheckTimeout = time.Minute

func newCondition(d *db.DB, path string, log *slog.Logger) *condition {
	ctx, cancel := context.WithCancel(context.Background())
	return &condition{db: d, path: path, log: log, ctx: ctx, cancel: cancel}
}

// stopChecks cancels a running quick check and waits for it; no check
// starts afterwards.
func (c *condition) stopChecks() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.checks.Wait()
}

// observe notes what a failed statement says about the store: a full disk
// (reported until a write goes through) or corruption, which a quick
// check then confirms in the background. It is meant for deferred calls
// on a method's named error.
func (c *condition) observe(errp *error) {
	err := *errp
	switch {
	case err == nil:
	case IsFull(err):
		c.noteFull(err)
	case IsCorrupt(err):
		c.startCheck(err)
	}
}

// startCheck confirms a corruption in the background, one check at a
// time, unless the store is closing.
func (c *condition) startCheck(cause error) {
	if !c.checking.CompareAndSwap(false, true) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		c.checking.Store(false)
		return
	}
	c.checks.Go(func() { c.confirmCorruption(cause) })
}

func (c *condition) noteFull(err error) {
	now := time.Now()
	c.mu.Lock()
	if c.full == nil {
		c.fullSince = now
	}
	c.full = err
	c.fullFailed++
	n, since := c.fullFailed, c.fullSince
	logIt := now.Sub(c.fullLogged) >= fullLogEvery
	if logIt {
		c.fullLogged, c.fullFailed = now, 0
	}
	c.mu.Unlock()
	if logIt {
		c.log.Error("agent store disk full: queued records are kept and still flushed, new ones are refused until space returns",
			"path", c.path, "failed_writes", n, "since", since.UTC().Format(time.RFC3339), "err", err)
	}
}

// wrote clears the full state after a write that needed new space.
func (c *condition) wrote() {
	c.mu.Lock()
	was, since, n := c.full, c.fullSince, c.fullFailed
	c.full, c.fullFailed, c.fullLogged = nil, 0, time.Time{}
	c.mu.Unlock()
	if was != nil {
		c.log.Warn("agent store can write again", "path", c.path, "full_for", time.Since(since).Round(time.Second),
			"failed_writes_unlogged", n)
	}
}

// confirmCorruption runs a quick check after a statement reported
// corruption. Only a verdict other than "ok", or the check itself failing
// with corruption, marks the store corrupt and calls the corruption
// handler, which reopens the store (Open moves the file aside and
// salvages it): that costs a soft reboot, so a check that could not run
// (the store closed under it, its timeout on a slow card, an I/O error)
// proves nothing and only leaves a warning; the next corruption error
// checks again.
func (c *condition) confirmCorruption(cause error) {
	defer c.checking.Store(false)
	ctx, cancel := context.WithTimeout(c.ctx, quickCheckTimeout)
	defer cancel()
	check := c.check
	if check == nil {
		check = c.quickCheck
	}
	verdict, err := check(ctx)
	switch {
	case err == nil && verdict == "ok":
		c.log.Warn("agent store reported corruption but its quick check passed", "path", c.path, "err", cause)
		return
	case err != nil && !IsCorrupt(err):
		c.log.Warn("agent store reported corruption but its quick check could not run; not treated as corrupt",
			"path", c.path, "err", cause, "check_err", err)
		return
	}
	reason := fmt.Sprintf("corrupt: %v (quick_check: %s)", cause, firstLine(verdict, err))
	c.mu.Lock()
	c.corrupt = reason
	c.mu.Unlock()
	c.log.Error("agent store corrupt", "path", c.path, "reason", reason)
	if fn := c.onCorrupt.Load(); fn != nil {
		(*fn)(reason)
	}
}

// OnCorruption sets what the store calls, once per detection, when a
// statement failed with corruption and a quick check confirmed it. The
// agent reopens its store then. fn runs on the check's goroutine, which
// Close waits for, so fn must not call Close itself.
func (s *Store) OnCorruption(fn func(reason string)) { s.cond.onCorrupt.Store(&fn) }

func (c *condition) quickCheck(ctx context.Context) (string, error) {
	var verdict string
	if err := c.db.SQL().QueryRowContext(ctx, "PRAGMA quick_check(3)").Scan(&verdict); err != nil {
		return "", fmt.Errorf("quick check: %w", err)
	}
	return verdict, nil
}

// firstLine is the first finding of a quick check, without the
// "*** in database main ***" heading SQLite puts before it.
func firstLine(verdict string, err error) string {
	if err != nil {
		return err.Error()
	}
	for l := range strings.SplitSeq(verdict, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "***") {
			return l
		}
	}
	return verdict
}

// Condition is the store's health for the agent's health report.
type Condition struct {
	Healthy bool
	// Reason says what is wrong, and what to do, when not healthy.
	Reason string
}

// spaceProbe is larger than a page, so writing it needs space the file
// does not have when the disk (or max_page_count) is full.
const spaceProbe = 8 << 10

// Condition reports the store unhealthy while its disk is full (checked
// again by writing a probe, so it clears once space returns even when
// nothing else writes), after a corruption was found, and while a copy of
// a corrupt store is kept in the data directory.
func (s *Store) Condition(ctx context.Context) Condition { return s.cond.report(ctx) }

// report is Condition.
func (c *condition) report(ctx context.Context) Condition {
	c.mu.Lock()
	corrupt, full, since := c.corrupt, c.full, c.fullSince
	c.mu.Unlock()
	if corrupt != "" {
		return Condition{Reason: corrupt + "; the agent reopens the store, moving the file aside"}
	}
	if full != nil {
		if err := c.probeSpace(ctx); IsFull(err) {
			return Condition{Reason: fmt.Sprintf("disk full since %s (%v): queued records are kept and flushed, new records are refused",
				since.UTC().Format(time.RFC3339), full)}
		} else if err == nil {
			c.wrote()
		}
	}
	if err := c.ping(ctx); err != nil {
		return Condition{Reason: err.Error()}
	}
	if r := c.recoveryNote(); r != "" {
		return Condition{Reason: r}
	}
	return Condition{Healthy: true}
}

// ping checks the database answers.
func (c *condition) ping(ctx context.Context) (err error) {
	defer c.observe(&err)
	return c.db.Ping(ctx)
}

// probeSpace writes and deletes spaceProbe bytes in one transaction.
func (c *condition) probeSpace(ctx context.Context) (err error) {
	defer c.observe(&err)
	tx, err := c.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("probe free space: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `INSERT INTO agent_meta (key, value) VALUES ('store.space_probe', $1)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, strings.Repeat("x", spaceProbe)); err != nil {
		return fmt.Errorf("probe free space: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM agent_meta WHERE key = 'store.space_probe'`); err != nil {
		return fmt.Errorf("probe free space: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("probe free space: %w", err)
	}
	return nil
}

// recoveryNote names the corrupt copies kept in the data directory, the
// evidence an operator should look at; removing them clears it.
func (c *condition) recoveryNote() string {
	copies := CorruptCopies(filepath.Dir(c.path))
	if len(copies) == 0 {
		return ""
	}
	msg := "recovered from a corrupt store"
	if r := c.recovery; r != nil {
		msg = r.String()
	}
	return fmt.Sprintf("%s; corrupt copies kept for inspection: %s (remove them to clear this)", msg, strings.Join(copies, ", "))
}

// CorruptCopies lists the corrupt stores Open moved aside in dataDir
// (their -wal, -shm and -header files not counted).
func CorruptCopies(dataDir string) []string {
	m, _ := filepath.Glob(filepath.Join(dataDir, FileName+corruptSuffix+"*"))
	out := m[:0]
	for _, p := range m {
		if !strings.HasSuffix(p, "-wal") && !strings.HasSuffix(p, "-shm") && !strings.HasSuffix(p, headerSuffix) {
			out = append(out, filepath.Base(p))
		}
	}
	slices.Sort(out)
	return out
}
