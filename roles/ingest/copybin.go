package ingest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/jackc/pgx/v5/pgxpool"
)

// copyBinary writes rows with COPY ... FROM STDIN (FORMAT binary), encoding
// the tuples itself. pgx's CopyFrom builds a []any per row and plans every
// value; encoding our fixed ten columns directly cost 0.55 µs of client
// CPU per row against 1.9 µs, which on a 2-core host is the difference
// between the workers and PostgreSQL competing for CPU and PostgreSQL
// having it. The format is PostgreSQL's documented binary COPY format.
func copyBinary(ctx context.Context, pool *pgxpool.Pool, rows []telemetry.Row) (int64, error) {
	buf := copyBufs.Get().(*bytes.Buffer)
	encodeCopy(buf, rows)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		recycleCopyBuf(buf)
		return 0, fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	tag, err := conn.Conn().PgConn().CopyFrom(ctx, buf, copySQL)
	if err != nil {
		// When the copy fails (the connection dropped, ctx ended),
		// CopyFrom can return while its goroutine still reads buf; a
		// recycled buffer would be reset and refilled under it. Leave
		// this one to the garbage collector.
		return 0, err
	}
	recycleCopyBuf(buf)
	return tag.RowsAffected(), nil
}

// recycleCopyBuf returns buf to the pool, unless it grew so large that
// keeping it would pin the memory for good.
func recycleCopyBuf(buf *bytes.Buffer) {
	if buf.Cap() <= 16<<20 {
		buf.Reset()
		copyBufs.Put(buf)
	}
}

var copyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

var copySQL = "COPY readings (" + strings.Join(readingColumns, ", ") + ") FROM STDIN (FORMAT binary)"

// pgEpochMicros is PostgreSQL's timestamp epoch, 2000-01-01 UTC, in Unix
// microseconds: binary timestamptz is microseconds since then.
var pgEpochMicros = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// encodeCopy appends the binary COPY stream for rows: the 19-byte header,
// one tuple per row in readingColumns order, and the trailer.
func encodeCopy(buf *bytes.Buffer, rows []telemetry.Row) {
	buf.Grow(19 + len(rows)*128 + 2)
	buf.WriteString("PGCOPY\n\xff\r\n\x00")
	buf.Write([]byte{0, 0, 0, 0, 0, 0, 0, 0}) // flags, header extension length
	var b [8]byte
	u16 := func(v uint16) { binary.BigEndian.PutUint16(b[:2], v); buf.Write(b[:2]) }
	u32 := func(v uint32) { binary.BigEndian.PutUint32(b[:4], v); buf.Write(b[:4]) }
	u64 := func(v uint64) { binary.BigEndian.PutUint64(b[:], v); buf.Write(b[:]) }
	const null = 0xffffffff
	text := func(s string) {
		if s == "" {
			u32(null) // as nullable() does for the other insert paths
			return
		}
		u32(uint32(len(s)))
		buf.WriteString(s)
	}
	for i := range rows {
		r := &rows[i]
		u16(uint16(len(readingColumns)))
		u32(8)
		u64(uint64(r.Time.UnixMicro() - pgEpochMicros))
		u32(16)
		buf.Write(r.AgentUUID[:])
		u32(uint32(len(r.MetricName)))
		buf.WriteString(r.MetricName)
		if r.Value == nil {
			u32(null)
		} else {
			u32(8)
			u64(math.Float64bits(*r.Value))
		}
		text(r.Protocol)
		text(r.Unit)
		text(r.Quality)
		text(r.DeviceName)
		text(r.TenantID)
		if r.AnomalyScore == nil {
			u32(null)
		} else {
			u32(8)
			u64(math.Float64bits(*r.AnomalyScore))
		}
	}
	u16(0xffff)
}
