package redis

import (
	"hash/fnv"
	"strconv"
	"strings"
)

// Key names on Redis Cluster.
//
// A transaction or a script may only touch keys of one slot, and Redis
// hashes only a key's hash tag, the part between its first '{' and the
// next '}', when there is one. The roles name a tenant's keys
// tenant:<id>:... (its streams, its de-duplication marks and, from those,
// the claims), so on Cluster the store writes them as tenant:{<id>}:...,
// and everything of one tenant lands on one slot: Produce's transaction of
// mark, claim and append can run there as it does on one server.
//
// Only Cluster gets the braces. A single server (or Sentinel) keeps the
// names the roles give, which are the names earlier releases wrote, so an
// upgraded installation finds its streams, consumer groups, pending
// entries and marks where they were, with nothing to migrate.
//
// Callers see their own names everywhere: errors, Streams and patterns
// speak of tenant:<id>:..., and only the wire carries the braces.

// wireKey is the key the server holds for name: name itself, except on
// Cluster, where a tenant:<id>:... name gets its id as hash tag. A name
// whose id already has braces is left alone (Redis hashes whatever tag it
// carries).
func (s *Store) wireKey(name string) string {
	if !s.cluster {
		return name
	}
	return clusterKey(name)
}

func clusterKey(name string) string {
	rest, ok := strings.CutPrefix(name, tenantPrefix)
	if !ok {
		return name
	}
	id, tail, ok := strings.Cut(rest, ":")
	if !ok || id == "" || strings.ContainsAny(id, "{}") {
		return name
	}
	return tenantPrefix + "{" + id + "}:" + tail
}

// nameOf is wireKey's inverse, for keys found in the keyspace: the name the
// registry holds and Streams returns.
func (s *Store) nameOf(key string) string {
	if !s.cluster {
		return key
	}
	return nameOfKey(key)
}

func nameOfKey(key string) string {
	rest, ok := strings.CutPrefix(key, tenantPrefix+"{")
	if !ok {
		return key
	}
	id, tail, ok := strings.Cut(rest, "}:")
	if !ok || id == "" || strings.ContainsAny(id, "{}:") { // clusterKey's ids have none

		return key
	}
	return tenantPrefix + id + ":" + tail
}

const tenantPrefix = "tenant:"

// hashTag is what Redis Cluster hashes of key: its tag, or all of it.
// Keys with equal hash tags share a slot.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// registryShards is how many sets the stream registry is split into on
// Cluster. Every append adds its stream to the registry; one set would
// put all producers' registrations on one master. Each shard is a key of
// its own slot, and a stream's shard follows from its hash tag, so all of
// a tenant's streams are in one shard. Streams reads them all, which costs
// a round trip per shard, every few seconds.
const registryShards = 16

// registryShardKeys are the shard sets, edgeplat:streams:{0} to {15}.
var registryShardKeys = func() []string {
	keys := make([]string, registryShards)
	for i := range keys {
		keys[i] = registryKey + ":{" + strconv.Itoa(i) + "}"
	}
	return keys
}()

// registryOf is the registry set that holds stream (a caller's name).
func (s *Store) registryOf(stream string) string {
	if !s.cluster {
		return registryKey
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(hashTag(clusterKey(stream))))
	return registryShardKeys[h.Sum32()%registryShards]
}

// registries are all the registry sets.
func (s *Store) registries() []string {
	if !s.cluster {
		return []string{registryKey}
	}
	return registryShardKeys
}

// byRegistry groups streams by the registry set that holds them, as SADD
// and SREM arguments: their names as the registry spells them (on
// Cluster, tenant:<id>:... whichever way the caller wrote it).
func (s *Store) byRegistry(streams []string) map[string][]any {
	out := make(map[string][]any)
	for _, st := range streams {
		k := s.registryOf(st)
		out[k] = append(out[k], s.nameOf(s.wireKey(st)))
	}
	return out
}
