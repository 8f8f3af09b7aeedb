// Package redis is the production stream store: streamstore.Store on Redis
// 7 (or a compatible server) through go-redis, which this package imports
// as goredis so that callers can keep the short name. Options select a
// single server, Redis Cluster or Sentinel; appends with a maxLen are one
// Lua script, blocking reads are sliced so cancellation is noticed, and
// trimming is exact. On Cluster a tenant's keys get its id as hash tag
// (keys.go), so its stream, marks and claims share a slot. See
// docs/stream-store.md, sections Redis and Redis Cluster.
package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/netx"
	"github.com/edgeplat/edgeplat/core/streamstore"
)

// Options configures a Store. Zero durations and sizes take their defaults.
type Options struct {
	// Addrs are host:port addresses: one server, Cluster seed nodes, or,
	// with MasterName, sentinels.
	Addrs []string
	// MasterName selects Sentinel: the name of the monitored master.
	MasterName string
	// Cluster selects Redis Cluster even with a single seed address.
	Cluster bool
	// Username and Password authenticate (Username for ACL users).
	Username string
	Password string
	// SentinelPassword authenticates to the sentinels, when they need it.
	SentinelPassword string
	// DB is the database number; Cluster has only 0.
	DB int
	// TLS connects with TLS 1.2 or later, verifying the server's certificate
	// against the system roots for the host name dialled.
	TLS bool
	// DialTimeout (5 s), ReadTimeout and WriteTimeout (3 s) bound one
	// connection attempt and one command; blocking reads get their block
	// time on top.
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// PoolSize caps connections per node; go-redis's 10 per CPU when 0.
	// Each blocked ReadGroup holds one.
	PoolSize int
	// BlockSlice caps one XREADGROUP BLOCK, and so how long a cancelled
	// ReadGroup can take to return; 500 ms.
	BlockSlice time.Duration
	// SubscriptionBuffer is how many messages a subscription buffers
	// before it drops; 256.
	SubscriptionBuffer int
	// Settings names the settings Addrs came from, for the message when
	// the server cannot be reached ("STREAMSTORE_HOST, STREAMSTORE_PORT").
	Settings string
}

// OptionsFromConfig maps the streamstore config section: Host may be a
// comma-separated list, each entry with or without its own port (Port
// applies to those without).
func OptionsFromConfig(c config.StreamStore) Options {
	var addrs []string
	for h := range strings.SplitSeq(c.Host, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), strconv.Itoa(c.Port))
		}
		addrs = append(addrs, h)
	}
	return Options{Addrs: addrs, Password: c.Password.Reveal(), DB: c.DB, TLS: c.TLS, Settings: config.EnvNames("streamstore.host", "streamstore.port")}
}

const deadlineMargin = 100 * time.Millisecond

// Store is the Redis stream store. Create it with New.
type Store struct {
	opts   Options
	client goredis.UniversalClient
	// cluster says keys are named for Redis Cluster; see keys.go.
	cluster bool

	mu     sync.Mutex
	closed bool
	subs   map[*subscription]struct{}

	claims *claims
	// afterClaims, when set (tests only), runs between ProduceBatch's two
	// round trips.
	afterClaims func()
}

// New validates opts and builds the client. It does no I/O: connections
// are made on first use; call Ping to check the server is there.
func New(opts Options) (*Store, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("redis streamstore: %w", err)
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 5 * time.Second
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = 3 * time.Second
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = 3 * time.Second
	}
	if opts.BlockSlice == 0 {
		opts.BlockSlice = 500 * time.Millisecond
	}
	if opts.SubscriptionBuffer == 0 {
		opts.SubscriptionBuffer = 256
	}
	return &Store{opts: opts, client: newClient(opts), cluster: opts.isCluster(), subs: make(map[*subscription]struct{}), claims: newClaims()}, nil
}

func (o Options) validate() error {
	var errs []error
	if len(o.Addrs) == 0 {
		errs = append(errs, errors.New("no address"))
	}
	for _, a := range o.Addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			errs = append(errs, fmt.Errorf("address %q: %w", a, err))
			continue
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || host == "" {
			errs = append(errs, fmt.Errorf("address %q: want host:port with port 1..65535", a))
		}
	}
	if o.MasterName != "" && o.Cluster {
		errs = append(errs, errors.New("MasterName (Sentinel) and Cluster exclude each other"))
	}
	if o.DB < 0 || o.DB != 0 && o.isCluster() {
		errs = append(errs, fmt.Errorf("db %d: must be >= 0, and 0 on Cluster", o.DB))
	}
	if o.DialTimeout < 0 || o.ReadTimeout < 0 || o.WriteTimeout < 0 || o.BlockSlice < 0 || o.PoolSize < 0 || o.SubscriptionBuffer < 0 {
		errs = append(errs, errors.New("timeouts and sizes must not be negative"))
	}
	return errors.Join(errs...)
}

func (o Options) isCluster() bool {
	return o.MasterName == "" && (o.Cluster || len(o.Addrs) > 1)
}

func newClient(o Options) goredis.UniversalClient {
	var tlsConfig *tls.Config
	if o.TLS {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		// With several addresses, crypto/tls takes the server name from each
		// address dialled (nodes and masters are found at run time).
		if len(o.Addrs) == 1 && o.MasterName == "" {
			tlsConfig.ServerName, _, _ = net.SplitHostPort(o.Addrs[0])
		}
	}
	switch {
	case o.MasterName != "":
		return goredis.NewFailoverClient(&goredis.FailoverOptions{
			MasterName: o.MasterName, SentinelAddrs: o.Addrs, SentinelPassword: o.SentinelPassword,
			Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: tlsConfig,
			DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
			PoolSize: o.PoolSize, ContextTimeoutEnabled: true, DisableIdentity: true,
		})
	case o.isCluster():
		return goredis.NewClusterClient(&goredis.ClusterOptions{
			Addrs:    o.Addrs,
			Username: o.Username, Password: o.Password, TLSConfig: tlsConfig,
			DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
			PoolSize: o.PoolSize, ContextTimeoutEnabled: true, DisableIdentity: true,
		})
	default:
		return goredis.NewClient(&goredis.Options{
			Addr:     o.Addrs[0],
			Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: tlsConfig,
			DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
			PoolSize: o.PoolSize, ContextTimeoutEnabled: true, DisableIdentity: true,
		})
	}
}

// wrap names the operation and maps Redis's error replies to the
// streamstore errors. When ctx has ended, its error is the cause (go-redis
// reports a passed deadline as an i/o timeout); when the store was closed
// under the call, ErrClosed is.
func (s *Store) wrap(ctx context.Context, op, name string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s %s: %w", op, name, ctxErr)
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("%s %s: %w", op, name, streamstore.ErrClosed)
	}
	msg := err.Error()
	switch {
	case errors.Is(err, goredis.ErrClosed):
		err = streamstore.ErrClosed
	case strings.HasPrefix(msg, "NOGROUP"),
		strings.HasPrefix(msg, "ERR no such key"),                                        // XINFO on a missing stream
		strings.HasPrefix(msg, "UNBLOCKED") && strings.Contains(msg, "no longer exists"): // stream or group deleted under a blocked read
		err = streamstore.ErrNoGroup
	case strings.HasPrefix(msg, "STREAMFULL"):
		err = streamstore.ErrStreamFull
	case strings.HasPrefix(msg, "OOM"):
		err = fmt.Errorf("%w: %s", streamstore.ErrOutOfMemory, msg)
	}
	return fmt.Errorf("%s %s: %w", op, name, err)
}

// Scripter is the store's connection for other users of the same server
// that need atomic scripts on keys of their own (the Cloud API's shared
// rate limits: core/httpx/redislimit), so a process keeps one pool.
func (s *Store) Scripter() goredis.Scripter { return s.client }

// Ping checks the server answers (on Cluster: a node of it). When no
// connection can be opened at all, the error names the address and the
// settings to check, since that is the operator's next step.
func (s *Store) Ping(ctx context.Context) error {
	err := s.client.Ping(ctx).Err()
	if err == nil {
		return nil
	}
	if cause, ok := netx.DialCause(err); ok && ctx.Err() == nil {
		msg := "cannot reach Redis at " + strings.Join(s.opts.Addrs, ", ")
		if s.opts.Settings != "" {
			msg += " (" + s.opts.Settings + ")"
		}
		return &netx.SettingsError{Msg: msg + ": " + cause, Err: err}
	}
	return s.wrap(ctx, "ping", "", err)
}

// Memory reports INFO memory's used_memory and maxmemory (0: unlimited).
// On Cluster it reports the master closest to its cap, since that is the
// one that will refuse writes first.
func (s *Store) Memory(ctx context.Context) (used, max int64, err error) {
	cluster, ok := s.client.(*goredis.ClusterClient)
	if !ok {
		info, err := s.client.Info(ctx, "memory").Result()
		if err != nil {
			return 0, 0, s.wrap(ctx, "info", "memory", err)
		}
		return parseMemory(info)
	}
	var mu sync.Mutex
	worst := -1.0
	err = cluster.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return err
		}
		u, m, err := parseMemory(info)
		if err != nil {
			return err
		}
		ratio := 0.0
		if m > 0 {
			ratio = float64(u) / float64(m)
		}
		mu.Lock()
		defer mu.Unlock()
		if ratio > worst || ratio == worst && u > used {
			worst, used, max = ratio, u, m
		}
		return nil
	})
	if err != nil {
		return 0, 0, s.wrap(ctx, "info", "memory", err)
	}
	return used, max, nil
}

func parseMemory(info string) (used, max int64, err error) {
	found := 0
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "used_memory":
			dst = &used
		case "maxmemory":
			dst = &max
		default:
			continue
		}
		if *dst, err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("info memory: %s: %w", k, err)
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("info memory: used_memory or maxmemory missing")
	}
	return used, max, nil
}

// Close closes the subscriptions and the client. Calls in flight fail;
// later calls return streamstore.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
	for sub := range subs {
		_ = sub.close()
	}
	return s.client.Close()
}

// The store must satisfy the contract the roles are written against.
var _ streamstore.Store = (*Store)(nil)
