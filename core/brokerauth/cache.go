package brokerauth

import (
	"container/list"
	"time"
)

// perUserResults bounds the cached answers for one username: a device
// normally has one password, and a burst of wrong guesses must not grow
// the cache without limit.
const perUserResults = 4

// cachedResult is one answer of the store for a username and a password.
// The password is kept only as an HMAC under a key that lives in this
// process, so the cache never holds a password or an unsalted hash of one.
type cachedResult struct {
	mac     [32]byte
	id      Identity
	ok      bool
	expires time.Time
}

type userResults struct {
	name  string
	items []cachedResult // newest first
}

// resultCache remembers the store's answers per username, least recently
// used usernames evicted first. The Authorizer's mutex guards it.
type resultCache struct {
	max   int
	byKey map[string]*list.Element // of *userResults
	order *list.List
}

func newResultCache(max int) *resultCache {
	return &resultCache{max: max, byKey: make(map[string]*list.Element), order: list.New()}
}

func (c *resultCache) get(name string, mac [32]byte, now time.Time) (cachedResult, bool) {
	e, ok := c.byKey[name]
	if !ok {
		return cachedResult{}, false
	}
	u := e.Value.(*userResults)
	for i, r := range u.items {
		if r.mac != mac {
			continue
		}
		if !now.Before(r.expires) {
			u.items = append(u.items[:i], u.items[i+1:]...)
			if len(u.items) == 0 {
				c.remove(name)
			}
			return cachedResult{}, false
		}
		c.order.MoveToFront(e)
		return r, true
	}
	return cachedResult{}, false
}

func (c *resultCache) put(name string, r cachedResult) {
	e, ok := c.byKey[name]
	if !ok {
		e = c.order.PushFront(&userResults{name: name})
		c.byKey[name] = e
	} else {
		c.order.MoveToFront(e)
	}
	u := e.Value.(*userResults)
	items := make([]cachedResult, 0, perUserResults)
	items = append(items, r)
	for _, old := range u.items {
		if old.mac != r.mac && len(items) < perUserResults {
			items = append(items, old)
		}
	}
	u.items = items
	for c.order.Len() > c.max {
		c.remove(c.order.Back().Value.(*userResults).name)
	}
}

func (c *resultCache) remove(name string) {
	if e, ok := c.byKey[name]; ok {
		c.order.Remove(e)
		delete(c.byKey, name)
	}
}

func (c *resultCache) len() int { return c.order.Len() }

// identityTable remembers the identity of each username that authenticated
// successfully, for ACL callbacks that carry only a username and a client
// id. Entries do not expire with the result cache's TTL: a device stays
// connected far longer than that, and its ACL checks keep coming. They end
// when the key is invalidated, or when the table is full and they are the
// least recently used.
type identityTable struct {
	max    int
	byName map[string]*list.Element // of Identity
	order  *list.List
}

func newIdentityTable(max int) *identityTable {
	return &identityTable{max: max, byName: make(map[string]*list.Element), order: list.New()}
}

func (t *identityTable) get(name string) (Identity, bool) {
	e, ok := t.byName[name]
	if !ok {
		return Identity{}, false
	}
	t.order.MoveToFront(e)
	return e.Value.(Identity), true
}

func (t *identityTable) put(id Identity) {
	if e, ok := t.byName[id.Username]; ok {
		e.Value = id
		t.order.MoveToFront(e)
		return
	}
	t.byName[id.Username] = t.order.PushFront(id)
	for t.order.Len() > t.max {
		t.remove(t.order.Back().Value.(Identity).Username)
	}
}

func (t *identityTable) remove(name string) {
	if e, ok := t.byName[name]; ok {
		t.order.Remove(e)
		delete(t.byName, name)
	}
}

func (t *identityTable) len() int { return t.order.Len() }
