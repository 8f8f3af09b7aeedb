package accounts

import (
	"testing"

	"github.com/edgeplat/edgeplat/core/db/dbtest"
)

func TestHasAdminAndPasswordMatches(t *testing.T) {
	ctx := t.Context()
	d := dbtest.Migrated(t, "sqlite")
	store := NewStore(d)
	if has, err := store.HasAdmin(ctx); err != nil || has {
		t.Fatalf("HasAdmin on an empty installation = %v, %v; want false", has, err)
	}
	if _, err := store.Bootstrap(ctx, NewUser{Email: "Ops@Example.com", Password: "correct horse battery"}); err != nil {
		t.Fatal(err)
	}
	if has, err := store.HasAdmin(ctx); err != nil || !has {
		t.Fatalf("HasAdmin after Bootstrap = %v, %v; want true", has, err)
	}
	u, err := store.UserByEmail(ctx, " OPS@example.com ")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		user     User
		password string
		want     bool
	}{
		{u, "correct horse battery", true},
		{u, "correct horse battery ", false},
		{u, "", false},
		{User{Email: u.Email}, "correct horse battery", false}, // not read from the store
	} {
		if got := tt.user.PasswordMatches(tt.password); got != tt.want {
			t.Errorf("PasswordMatches(%q) with hash %v = %v, want %v", tt.password, tt.user.passwordHash != "", got, tt.want)
		}
	}
}
