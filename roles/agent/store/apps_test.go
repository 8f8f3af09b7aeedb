package store

import (
	"context"
	"errors"
	"testing"

	"github.com/edgeplat/edgeplat/core/control"
)

func TestAppsPutListDelete(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	svc := control.TargetService{ServiceName: "web", ImageName: "nginx:1", State: "running",
		Config: control.ServiceConfig{Image: "nginx:1", Ports: []string{"8080:80"}, Restart: "always"}}
	a, err := s.Apps().Put(ctx, control.TargetApp{AppName: "shop", Services: []control.TargetService{svc}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Apps().Put(ctx, control.TargetApp{AppName: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if a.AppID != 1 || b.AppID != 2 {
		t.Fatalf("ids = %d, %d; want 1, 2", a.AppID, b.AppID)
	}
	if _, err := s.Apps().Put(ctx, control.TargetApp{AppName: "shop"}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("same name: err = %v, want ErrDuplicate", err)
	}
	a.Services[0].Config.Environment = map[string]string{"A": "1"}
	if _, err := s.Apps().Put(ctx, a); err != nil {
		t.Fatal(err)
	}
	list, err := s.Apps().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].AppName != "shop" || list[0].Services[0].Config.Environment["A"] != "1" || list[1].Services == nil {
		t.Fatalf("list = %+v", list)
	}
	if err := s.Apps().Delete(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Apps().Delete(ctx, 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Apps().RuntimeConfig(ctx); !errors.Is(err, ErrNotFound) {
		t.Fatalf("runtime config before save: err = %v", err)
	}
	for _, v := range []string{`{"type":"socket"}`, `{"type":"tcp","host":"h"}`} {
		if err := s.Apps().SetRuntimeConfig(ctx, []byte(v)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Apps().RuntimeConfig(ctx)
		if err != nil || string(got) != v {
			t.Fatalf("runtime config = %s, %v; want %s", got, err, v)
		}
	}
}
