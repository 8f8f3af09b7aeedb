package redis

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/edgeplat/edgeplat/core/streamstore"
)

// Persistence reads the server's persistence settings with CONFIG GET, or,
// where CONFIG is renamed away or refused (managed services, ACLs), from
// INFO persistence, which tells the append-only file but not the snapshot
// schedule.
func (s *Store) Persistence(ctx context.Context) (streamstore.Persistence, error) {
	conf := make(map[string]string, 3)
	var cerr error
	for _, k := range []string{"appendonly", "appendfsync", "save"} {
		m, err := s.client.ConfigGet(ctx, k).Result()
		if err != nil {
			cerr = err
			break
		}
		for mk, mv := range m {
			conf[mk] = mv
		}
	}
	if cerr == nil {
		return persistenceFromConfig(conf), nil
	}
	info, err := s.client.Info(ctx, "persistence").Result()
	if err != nil {
		return streamstore.Persistence{}, fmt.Errorf("read redis persistence: config get: %v; info persistence: %w", cerr, err)
	}
	return persistenceFromInfo(info), nil
}

// persistenceFromConfig reads CONFIG GET's appendonly, appendfsync and save.
func persistenceFromConfig(conf map[string]string) streamstore.Persistence {
	return streamstore.Persistence{
		AOF:      strings.EqualFold(conf["appendonly"], "yes"),
		AOFFsync: strings.ToLower(conf["appendfsync"]),
		RDB:      strings.TrimSpace(conf["save"]) != "",
		RDBKnown: true,
		Source:   "config",
	}
}

// persistenceFromInfo reads the "# Persistence" section of INFO. It has no
// save points; a snapshot taken since the start (rdb_saves, Redis 7, or a
// last bgsave time) shows that snapshots happen.
func persistenceFromInfo(info string) streamstore.Persistence {
	p := streamstore.Persistence{Source: "info"}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch k {
		case "aof_enabled":
			p.AOF = v == "1"
		case "rdb_saves":
			if v != "0" {
				p.RDB, p.RDBKnown = true, true
			}
		case "rdb_last_bgsave_time_sec":
			if v != "-1" {
				p.RDB, p.RDBKnown = true, true
			}
		}
	}
	return p
}

var _ streamstore.PersistenceReporter = (*Store)(nil)
