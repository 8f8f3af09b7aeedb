package lifecycle

import "context"

// Funcs adapts plain functions to Service, for small services that need no
// type of their own. A nil function is a no-op, except a nil RunFunc, which
// waits for ctx.
type Funcs struct {
	ServiceName string
	StartFunc   func(ctx context.Context) error
	RunFunc     func(ctx context.Context) error
	StopFunc    func(ctx context.Context) error
}

// Name implements Service.
func (f *Funcs) Name() string { return f.ServiceName }

// Start implements Service.
func (f *Funcs) Start(ctx context.Context) error {
	if f.StartFunc == nil {
		return nil
	}
	return f.StartFunc(ctx)
}

// Run implements Service.
func (f *Funcs) Run(ctx context.Context) error {
	if f.RunFunc == nil {
		<-ctx.Done()
		return nil
	}
	return f.RunFunc(ctx)
}

// Stop implements Service.
func (f *Funcs) Stop(ctx context.Context) error {
	if f.StopFunc == nil {
		return nil
	}
	return f.StopFunc(ctx)
}

var _ Service = (*Funcs)(nil)
