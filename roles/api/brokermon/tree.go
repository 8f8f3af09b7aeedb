package brokermon

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Default bounds of the topic tree (docs/broker-monitoring.md, section
// Bounds).
const (
	DefaultMaxNodes          = 50000 // levels of all tenants together
	DefaultMaxNodesPerTenant = 5000  // levels of one tenant: one tenant cannot take the others' room
	maxDepth                 = 16    // levels below i/{tenant}
)

// node is one topic level. Its counters move with atomics under the read
// lock; only new levels take the write lock, so the hot path of a topic
// seen before is a few map look-ups and atomic adds, no allocation.
type node struct {
	name     string
	messages atomic.Int64 // at this level or below
	own      atomic.Int64 // whose topic ends here
	bytes    atomic.Int64
	last     atomic.Int64 // unix nanoseconds
	next     atomic.Int64 // unix nanoseconds of the next schema sample
	children map[string]*node
	size     int // nodes in the subtree, for a tenant's root; under Tree.mu
}

func (n *node) hit(now int64, size int) {
	n.messages.Add(1)
	n.bytes.Add(int64(size))
	n.last.Store(now)
}

// tree counts messages per topic level, one subtree per tenant rooted at
// i/{tenant}.
type tree struct {
	mu        sync.RWMutex
	tenants   map[string]*node
	nodes     int
	maxNodes  int
	perTenant int
	every     time.Duration
	// refused counts messages whose topic found no room (bounds, depth):
	// they are counted on the levels that exist.
	refused  atomic.Int64
	messages atomic.Int64
	bytes    atomic.Int64
}

func newTree(maxNodes, perTenant int, sampleEvery time.Duration) *tree {
	return &tree{tenants: map[string]*node{}, maxNodes: maxNodes, perTenant: perTenant, every: sampleEvery}
}

// observe counts one message of tenant on topic, which must be
// i/{tenant}/...; true when a schema sample of it is due.
func (t *tree) observe(tenant, topic string, size int, now time.Time) bool {
	rest, ok := strings.CutPrefix(topic, "i/")
	if ok {
		rest, ok = strings.CutPrefix(rest, tenant)
	}
	if ok {
		rest, ok = strings.CutPrefix(rest, "/")
	}
	if !ok || tenant == "" || rest == "" {
		return false
	}
	t.messages.Add(1)
	t.bytes.Add(int64(size))
	ns := now.UnixNano()
	var path [maxDepth + 1]*node
	t.mu.RLock()
	depth, complete := t.walk(tenant, rest, &path, false)
	t.mu.RUnlock()
	if !complete {
		t.mu.Lock()
		depth, complete = t.walk(tenant, rest, &path, true)
		t.mu.Unlock()
	}
	for _, n := range path[:depth] {
		n.hit(ns, size)
	}
	if !complete {
		t.refused.Add(1)
		return false
	}
	leaf := path[depth-1]
	leaf.own.Add(1)
	next := leaf.next.Load()
	return ns >= next && leaf.next.CompareAndSwap(next, ns+int64(t.every))
}

// walk fills path with the tenant's root and the levels of rest, creating
// missing ones when create is set (under the write lock) and room is left.
// It returns how many it filled and whether that is all of them.
func (t *tree) walk(tenant, rest string, path *[maxDepth + 1]*node, create bool) (int, bool) {
	root := t.tenants[tenant]
	if root == nil {
		if !create || t.nodes >= t.maxNodes {
			return 0, false
		}
		root = &node{name: "i/" + tenant, size: 1}
		t.tenants[strings.Clone(tenant)] = root
		t.nodes++
	}
	path[0] = root
	n, depth := root, 1
	for {
		level, more, found := strings.Cut(rest, "/")
		if depth > maxDepth {
			return depth, false
		}
		c := n.children[level]
		if c == nil {
			if !create || t.nodes >= t.maxNodes || root.size >= t.perTenant {
				return depth, false
			}
			if n.children == nil {
				n.children = map[string]*node{}
			}
			c = &node{name: strings.Clone(level)}
			n.children[c.name] = c
			t.nodes++
			root.size++
		}
		path[depth] = c
		n, depth = c, depth+1
		if !found {
			return depth, true
		}
		rest = more
	}
}

// TopicNode is one level of a tenant's topic tree as the API shows it.
type TopicNode struct {
	Name  string `json:"name"`
	Topic string `json:"topic"`
	// Messages counts messages on this topic and every topic below it;
	// Own only those on this very topic.
	Messages int64       `json:"messages"`
	Own      int64       `json:"ownMessages"`
	Bytes    int64       `json:"bytes"`
	LastSeen *time.Time  `json:"lastSeen,omitempty"`
	Children []TopicNode `json:"children,omitempty"`
}

// subtree returns tenant's tree, false when the tenant has no topic.
func (t *tree) subtree(tenant string) (TopicNode, int, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	root := t.tenants[tenant]
	if root == nil {
		return TopicNode{}, 0, false
	}
	return render(root, root.name), root.size, true
}

func render(n *node, topic string) TopicNode {
	out := TopicNode{Name: n.name, Topic: topic, Messages: n.messages.Load(), Own: n.own.Load(), Bytes: n.bytes.Load()}
	if ns := n.last.Load(); ns != 0 {
		at := time.Unix(0, ns).UTC()
		out.LastSeen = &at
	}
	for _, c := range n.children {
		out.Children = append(out.Children, render(c, topic+"/"+c.name))
	}
	slices.SortFunc(out.Children, func(a, b TopicNode) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// leaves returns the topics of a rendered tree that messages were
// published on, most messages first, at most limit of them.
func leaves(root TopicNode, limit int) []TopicNode {
	var out []TopicNode
	var visit func(n TopicNode)
	visit = func(n TopicNode) {
		if n.Own > 0 {
			leaf := n
			leaf.Children = nil
			out = append(out, leaf)
		}
		for _, c := range n.Children {
			visit(c)
		}
	}
	visit(root)
	slices.SortStableFunc(out, func(a, b TopicNode) int {
		switch {
		case a.Own > b.Own:
			return -1
		case a.Own < b.Own:
			return 1
		}
		return strings.Compare(a.Topic, b.Topic)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
