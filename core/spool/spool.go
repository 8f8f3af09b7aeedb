// Package spool is the NDJSON disk spool that keeps telemetry while the
// stream store (Cloud API) or the database (ingestion) is failing. Appends
// are fsynced before they return, so a caller may acknowledge a message
// once Append succeeded. Files are capped (10 MB), numbered spool-1.ndjson,
// spool-2.ndjson, ...; numbering continues after a restart; the oldest file
// is deleted, with a warning, when the total passes the configured maximum;
// replay goes oldest first and remembers how far it got, so a crash during
// replay repeats at most one batch (the consumers are idempotent). On a
// full disk, where even that position cannot be written, replay keeps it
// in memory and goes on, so it never repeats what it handed over; only a
// crash before the position is saved again repeats more. An append that
// fails for space says so (Stats.DiskFull) and leaves no torn bytes
// behind.
package spool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Entry is one spooled line: where the data came from (for example the MQTT
// topic or the stream name) and the telemetry items themselves.
type Entry struct {
	Source string          `json:"source"`
	Data   json.RawMessage `json:"data"`
}

// DefaultFileBytes caps one spool file.
const DefaultFileBytes = 10 << 20

// Options configures a Spool.
type Options struct {
	Dir string
	// MaxBytes caps the spool's total size; the oldest file goes first.
	MaxBytes int64
	// FileBytes caps one file; DefaultFileBytes when zero.
	FileBytes int64
	Logger    *slog.Logger
	// NoSync skips fsync, for benchmarks only: without it an acknowledged
	// message can be lost in a power cut.
	NoSync bool
}

// Stats describes the spool's current contents.
type Stats struct {
	Files int
	Bytes int64
	// DroppedFiles counts files deleted to stay under MaxBytes.
	DroppedFiles int64
	// SkippedLines counts torn or corrupt lines skipped during replay.
	SkippedLines int64
	// DiskFull is true while the spool's file system has no room: the last
	// Append failed for space (ENOSPC or a quota) and neither an Append nor
	// a replay has freed or found room since.
	DiskFull bool
	// PositionUnsaved is true while replay progress is kept in memory only,
	// because writing it to disk failed (a full disk, typically).
	PositionUnsaved bool
}

type file struct {
	n    int
	size int64
}

// Spool is safe for concurrent use; one Replay runs at a time, alongside
// any number of Appends.
type Spool struct {
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	files   []file // sorted by n; the last may be the open writer
	w       *os.File
	wn      int // number of the file w writes; 0 when none is open
	next    int
	dropped int64
	skipped int64
	pos     position
	// diskFull: see Stats.DiskFull. posUnsaved: pos is ahead of the
	// position file.
	diskFull   bool
	posUnsaved bool
	// closed is final: Close sealed the writer, and no file opens again.
	closed bool
	// writeFile writes the position file; a seam for tests that inject a
	// full disk.
	writeFile func(name string, data []byte, perm os.FileMode) error

	replayMu sync.Mutex
}

// position is how far replay got: byte offset into file n.
type position struct {
	n      int
	offset int64
}

var namePattern = regexp.MustCompile(`^spool-([1-9][0-9]*)\.ndjson$`)

const posFile = "replay.pos"

// Open creates the directory (0700) if needed and indexes the files already
// there. It does not create a file until the first Append.
func Open(opts Options) (*Spool, error) {
	if opts.Dir == "" {
		return nil, errors.New("spool: directory not set")
	}
	if opts.FileBytes <= 0 {
		opts.FileBytes = DefaultFileBytes
	}
	if opts.MaxBytes <= 0 {
		return nil, fmt.Errorf("spool: maximum size must be positive, got %d", opts.MaxBytes)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create spool directory: %w", err)
	}
	entries, err := os.ReadDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("read spool directory: %w", err)
	}
	s := &Spool{opts: opts, log: opts.Logger, next: 1, writeFile: os.WriteFile}
	for _, e := range entries {
		m := namePattern.FindStringSubmatch(e.Name())
		if m == nil || !e.Type().IsRegular() {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("stat spool file %s: %w", e.Name(), err)
		}
		s.files = append(s.files, file{n: n, size: info.Size()})
		if n >= s.next {
			s.next = n + 1
		}
	}
	sort.Slice(s.files, func(i, j int) bool { return s.files[i].n < s.files[j].n })
	s.pos = s.readPos()
	if s.pos.n != 0 && !slices.ContainsFunc(s.files, func(f file) bool { return f.n == s.pos.n }) {
		// The file it pointed into is gone; a future file with the same
		// number must replay from its start.
		s.pos = position{}
	}
	if len(s.files) > 0 {
		st := s.statsLocked()
		s.log.Info("spool has data from a previous run", "dir", opts.Dir, "files", st.Files, "bytes", st.Bytes)
	}
	return s, nil
}

func (s *Spool) path(n int) string {
	return filepath.Join(s.opts.Dir, "spool-"+strconv.Itoa(n)+".ndjson")
}

// Append writes entries as one write and one fsync. When it returns nil the
// entries survive a crash.
func (s *Spool) Append(entries ...Entry) error {
	if len(entries) == 0 {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, e := range entries {
		if !json.Valid(e.Data) {
			return fmt.Errorf("spool: entry from %q has invalid JSON data", e.Source)
		}
		if err := enc.Encode(e); err != nil {
			return fmt.Errorf("spool: encode entry: %w", err)
		}
	}
	if int64(buf.Len()) > s.opts.FileBytes {
		return fmt.Errorf("spool: %d bytes in one append exceed the %d-byte file cap", buf.Len(), s.opts.FileBytes)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.w != nil && s.files[len(s.files)-1].size+int64(buf.Len()) > s.opts.FileBytes {
		if err := s.sealLocked(); err != nil {
			return err
		}
	}
	if s.w == nil {
		if err := s.openWriterLocked(); err != nil {
			s.noteSpaceLocked(err)
			return err
		}
	}
	if err := s.writeLocked(buf.Bytes()); err != nil {
		s.noteSpaceLocked(err)
		return err
	}
	s.files[len(s.files)-1].size += int64(buf.Len())
	s.diskFull = false
	s.enforceMaxLocked()
	return nil
}

// writeLocked writes and syncs one append. A write that fails part way
// (ENOSPC after some bytes) is cut back off the file: left there, the next
// append would continue the torn line and replay would skip both as
// corrupt, losing an entry whose Append had succeeded. When the cut fails
// too, the file is sealed so the torn bytes end it, where replay skips
// them as a torn last line.
func (s *Spool) writeLocked(b []byte) error {
	size := s.files[len(s.files)-1].size
	_, err := s.w.Write(b)
	if err == nil && !s.opts.NoSync {
		if err = s.w.Sync(); err != nil {
			err = fmt.Errorf("spool: sync %s: %w", s.w.Name(), err)
		}
	} else if err != nil {
		err = fmt.Errorf("spool: write %s: %w", s.w.Name(), err)
	}
	if err == nil {
		return nil
	}
	if terr := s.w.Truncate(size); terr != nil {
		s.log.Warn("spool: cannot cut a failed append off its file; starting a new file", "file", s.w.Name(), "err", terr)
		_ = s.sealLocked()
	}
	return err
}

// noteSpaceLocked records whether err says the file system is full.
func (s *Spool) noteSpaceLocked(err error) {
	if IsNoSpace(err) && !s.diskFull {
		s.diskFull = true
		s.log.Error("spool disk full: telemetry can no longer be spooled", "dir", s.opts.Dir, "err", err)
	}
}

// IsNoSpace reports whether err is a file system out of space or over its
// quota.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

func (s *Spool) openWriterLocked() error {
	n := s.next
	f, err := os.OpenFile(s.path(n), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("spool: create file: %w", err)
	}
	if !s.opts.NoSync {
		// The new name must survive a crash too, not only its contents.
		if err := syncDir(s.opts.Dir); err != nil {
			_ = f.Close()
			return err
		}
	}
	s.next++
	s.w, s.wn = f, n
	s.files = append(s.files, file{n: n})
	return nil
}

// sealLocked closes the writer; the next Append starts a new file.
func (s *Spool) sealLocked() error {
	if s.w == nil {
		return nil
	}
	err := s.w.Close()
	s.w, s.wn = nil, 0
	if err != nil {
		return fmt.Errorf("spool: close file: %w", err)
	}
	return nil
}

// enforceMaxLocked deletes the oldest sealed files while the spool is over
// its cap. Losing the oldest data is the documented price of a full disk
// budget; it is logged and counted, never silent.
func (s *Spool) enforceMaxLocked() {
	for len(s.files) > 1 && s.statsLocked().Bytes > s.opts.MaxBytes {
		old := s.files[0]
		if old.n == s.wn {
			return
		}
		if err := os.Remove(s.path(old.n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Error("spool: delete oldest file", "file", s.path(old.n), "err", err)
			return
		}
		s.files = s.files[1:]
		s.dropped++
		if s.pos.n == old.n {
			s.pos = position{}
			_ = os.Remove(filepath.Join(s.opts.Dir, posFile))
		}
		s.log.Warn("spool over its size limit: deleted the oldest file", "file", s.path(old.n), "bytes", old.size, "max_bytes", s.opts.MaxBytes)
	}
}

// Stats returns the spool's size and counters.
func (s *Spool) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statsLocked()
}

func (s *Spool) statsLocked() Stats {
	st := Stats{Files: len(s.files), DroppedFiles: s.dropped, SkippedLines: s.skipped, DiskFull: s.diskFull, PositionUnsaved: s.posUnsaved}
	for _, f := range s.files {
		st.Bytes += f.size
	}
	return st
}

// Empty reports whether nothing is waiting for replay.
func (s *Spool) Empty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		if f.size > 0 {
			return false
		}
	}
	return true
}

// ErrClosed is returned by Append and Replay after Close.
var ErrClosed = errors.New("spool: closed")

// Close closes the writer, for good: a later Append or Replay returns
// ErrClosed rather than open a file that nobody would close. Spooled data
// stays on disk for the next run. Closing twice is harmless.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.sealLocked()
}

// Replay hands spooled entries to fn in batches of up to batch entries,
// oldest first, and deletes each file once fn has taken all of it. It seals
// the file being written first, so it never reads a line still being
// appended; Appends go on in a new file meanwhile. It stops at the first
// error of fn (the batch stays spooled) or of ctx, and returns how many
// entries fn accepted.
func (s *Spool) Replay(ctx context.Context, batch int, fn func(context.Context, []Entry) error) (int, error) {
	if batch <= 0 {
		batch = 100
	}
	s.replayMu.Lock()
	defer s.replayMu.Unlock()

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, ErrClosed
	}
	if s.w != nil && s.files[len(s.files)-1].size > 0 {
		if err := s.sealLocked(); err != nil {
			s.mu.Unlock()
			return 0, err
		}
	}
	var sealed []int
	for _, f := range s.files {
		if f.n != s.wn {
			sealed = append(sealed, f.n)
		}
	}
	s.mu.Unlock()

	total := 0
	for _, n := range sealed {
		done, err := s.replayFile(ctx, n, batch, fn)
		total += done
		if err != nil {
			return total, err
		}
		s.mu.Lock()
		if err := os.Remove(s.path(n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.mu.Unlock()
			return total, fmt.Errorf("spool: remove replayed file: %w", err)
		}
		for i, f := range s.files {
			if f.n == n {
				s.files = append(s.files[:i], s.files[i+1:]...)
				break
			}
		}
		// The file's space is free again; the next Append finds out
		// whether that is enough.
		s.diskFull = false
		s.mu.Unlock()
		s.removePos()
	}
	return total, nil
}

func (s *Spool) replayFile(ctx context.Context, n, batch int, fn func(context.Context, []Entry) error) (int, error) {
	f, err := os.Open(s.path(n))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil // deleted by the size cap while queued
	}
	if err != nil {
		return 0, fmt.Errorf("spool: open for replay: %w", err)
	}
	defer f.Close()

	var offset int64
	s.mu.Lock()
	if s.pos.n == n {
		offset = s.pos.offset
	}
	s.mu.Unlock()
	if offset > 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return 0, fmt.Errorf("spool: seek %s: %w", f.Name(), err)
		}
	}

	r := bufio.NewReaderSize(f, 64<<10)
	pending := make([]Entry, 0, batch)
	pendingEnd := offset
	done := 0
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		if err := fn(ctx, pending); err != nil {
			return err
		}
		done += len(pending)
		pending = pending[:0]
		s.advance(position{n: n, offset: pendingEnd})
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		line, err := readLine(r, s.opts.FileBytes)
		offset += int64(len(line))
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				// A crash during Append leaves a torn last line; the
				// append never returned success, so nothing acknowledged
				// is lost by skipping it.
				s.skip("torn last line skipped", f.Name(), offset)
			} else if e, perr := ParseLine(line); perr != nil {
				s.skip("corrupt line skipped: "+perr.Error(), f.Name(), offset)
			} else {
				pending = append(pending, e)
			}
			pendingEnd = offset
			if len(pending) >= batch {
				if ferr := flush(); ferr != nil {
					return done, ferr
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return done, flush()
		}
		if err != nil {
			return done, fmt.Errorf("spool: read %s: %w", f.Name(), err)
		}
	}
}

// readLine reads one line including its newline; a line longer than max is
// returned whole up to max so the caller can skip it as corrupt.
func readLine(r *bufio.Reader, max int64) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
		if int64(len(line)) > max {
			return line, fmt.Errorf("line longer than %d bytes", max)
		}
	}
}

func (s *Spool) skip(msg, file string, offset int64) {
	s.mu.Lock()
	s.skipped++
	s.mu.Unlock()
	s.log.Warn("spool: "+msg, "file", file, "offset", offset)
}

// ParseLine decodes one spool line. It is exported for the fuzz test and for
// tools that inspect spool files.
func ParseLine(line []byte) (Entry, error) {
	var e Entry
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return Entry{}, fmt.Errorf("decode spool line: %w", err)
	}
	if dec.More() {
		return Entry{}, errors.New("decode spool line: trailing data")
	}
	if len(e.Data) == 0 || string(e.Data) == "null" {
		return Entry{}, errors.New("decode spool line: no data")
	}
	return e, nil
}

func (s *Spool) readPos() position {
	b, err := os.ReadFile(filepath.Join(s.opts.Dir, posFile))
	if err != nil {
		return position{}
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return position{}
	}
	n, err1 := strconv.Atoi(fields[0])
	off, err2 := strconv.ParseInt(fields[1], 10, 64)
	if err1 != nil || err2 != nil || n < 1 || off < 0 {
		s.log.Warn("spool: ignoring unreadable replay position; the file replays from its start", "content", string(b))
		return position{}
	}
	return position{n: n, offset: off}
}

// advance moves replay progress past entries fn has taken. The position
// moves in memory first and unconditionally: the entries are in the store,
// and replaying them again, which is what an error here used to cause,
// turns a full disk into an endless loop over the same batch that never
// deletes the file whose deletion would free the disk. Saving the position
// is retried at every batch until it works; until then only a crash
// repeats entries (from the last saved position; consumers de-duplicate).
func (s *Spool) advance(p position) {
	s.mu.Lock()
	s.pos = p
	wasUnsaved := s.posUnsaved
	s.mu.Unlock()
	err := s.writePos(p)
	s.mu.Lock()
	s.posUnsaved = err != nil
	s.mu.Unlock()
	switch {
	case err != nil && !wasUnsaved:
		s.log.Warn("spool: cannot save the replay position; keeping it in memory and retrying", "err", err)
	case err == nil && wasUnsaved:
		s.log.Info("spool: replay position saved again")
	}
}

// writePos records replay progress atomically (write, sync, rename).
func (s *Spool) writePos(p position) error {
	tmp := filepath.Join(s.opts.Dir, posFile+".tmp")
	data := []byte(strconv.Itoa(p.n) + " " + strconv.FormatInt(p.offset, 10) + "\n")
	if err := s.writeFile(tmp, data, 0o600); err != nil {
		// A half-written temporary file only holds space a full disk
		// needs.
		_ = os.Remove(tmp)
		return fmt.Errorf("spool: write replay position: %w", err)
	}
	if !s.opts.NoSync {
		if f, err := os.Open(tmp); err == nil {
			_ = f.Sync()
			_ = f.Close()
		}
	}
	if err := os.Rename(tmp, filepath.Join(s.opts.Dir, posFile)); err != nil {
		return fmt.Errorf("spool: save replay position: %w", err)
	}
	return nil
}

func (s *Spool) removePos() {
	s.mu.Lock()
	s.pos = position{}
	s.posUnsaved = false
	s.mu.Unlock()
	if err := os.Remove(filepath.Join(s.opts.Dir, posFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("spool: remove replay position", "err", err)
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("spool: open directory for sync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("spool: sync directory: %w", err)
	}
	return nil
}
