package agent

import (
	"context"
	"fmt"

	"github.com/edgeplat/edgeplat/roles/agent/cloud"
	"github.com/edgeplat/edgeplat/roles/agent/logship"
)

// cloudLogs is logship.Uploader: the provisioned agent's cloud and
// device key, read from the store at each upload so a provisioning or a
// deprovisioning applies at the next batch.
type cloudLogs struct{ st *storeRef }

// UploadLogs implements logship.Uploader.
func (c cloudLogs) UploadLogs(ctx context.Context, gzipped []byte) error {
	cr, err := c.credentials(ctx)
	if err != nil {
		return err
	}
	client, err := cloud.NewClient(cr.APIEndpoint)
	if err != nil {
		return fmt.Errorf("cloud endpoint: %w", err)
	}
	return client.UploadLogs(ctx, *cr, gzipped)
}

// credentials holds the store only while it reads them, not for the
// upload: a closing store must not wait for the cloud.
func (c cloudLogs) credentials(ctx context.Context) (*cloud.Credentials, error) {
	release := c.st.Hold()
	defer release()
	st := c.st.Load()
	if st == nil {
		return nil, logship.ErrNotReady
	}
	cr, err := credentials(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("read cloud credentials: %w", err)
	}
	if cr == nil || !provisioned(ctx, st) {
		return nil, logship.ErrNotReady
	}
	return cr, nil
}

var _ logship.Uploader = cloudLogs{}
