package extdash

import (
	"testing"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m)
}
