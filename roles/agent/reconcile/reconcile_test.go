package reconcile

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

func TestPrefixedNamesEveryField(t *testing.T) {
	err := errors.Join(adapters.Fieldf("poll_interval", "must be 10..86400000"), adapters.Fieldf("connection.port", "must be 1..65535"))
	got := prefixed("endpoints[2]", err).Error()
	want := "endpoints[2].poll_interval: must be 10..86400000\nendpoints[2].connection.port: must be 1..65535"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestCanonicalIgnoresKeyOrder(t *testing.T) {
	a := store.Destination{Name: "d", Config: json.RawMessage(`{"url":"tcp://h:1","username":"u"}`)}
	b := store.Destination{Name: "d", Config: json.RawMessage(`{ "username": "u", "url": "tcp://h:1" }`)}
	if canonical(a) != canonical(b) {
		t.Fatalf("%s != %s", canonical(a), canonical(b))
	}
	b.Config = json.RawMessage(`{"username":"u","url":"tcp://h:2"}`)
	if canonical(a) == canonical(b) {
		t.Fatal("different configs compare equal")
	}
	// Large integers keep their digits, so a change in the last one shows.
	x := store.Destination{Config: json.RawMessage(`{"n":9007199254740993}`)}
	y := store.Destination{Config: json.RawMessage(`{"n":9007199254740992}`)}
	if canonical(x) == canonical(y) {
		t.Fatal("integers beyond float64 precision compare equal")
	}
}

func TestSameSubscriptionsIsASetComparison(t *testing.T) {
	s := func(id int64, topic string) store.Subscription {
		return store.Subscription{ID: id, DestinationID: id * 10, Topics: []string{topic}, PayloadFormat: "custom", Compression: "json", Enabled: true, Route: json.RawMessage("null")}
	}
	tests := []struct {
		name string
		a, b []store.Subscription
		want bool
	}{
		{"both empty", nil, []store.Subscription{}, true},
		{"ids ignored", []store.Subscription{s(1, "a")}, []store.Subscription{s(7, "a")}, true},
		{"order ignored", []store.Subscription{s(1, "a"), s(2, "b")}, []store.Subscription{s(3, "b"), s(4, "a")}, true},
		{"topic differs", []store.Subscription{s(1, "a")}, []store.Subscription{s(1, "b")}, false},
		{"one more", []store.Subscription{s(1, "a")}, []store.Subscription{s(1, "a"), s(2, "a")}, false},
	}
	for _, tt := range tests {
		if got := sameSubscriptions(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
