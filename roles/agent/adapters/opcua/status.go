package opcua

import (
	"errors"
	"fmt"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/gopcua/opcua/ua"
)

// Status code severities live in the top two bits (OPC-UA Part 4, 7.39).
const (
	severityMask      = 0xC0000000
	severityUncertain = 0x40000000
)

// isGood reports whether s has Good severity. Uncertain values are not
// trusted as GOOD readings: the payload has no third quality.
func isGood(s ua.StatusCode) bool { return uint32(s)&severityMask == 0 }

// statusQuality maps an OPC-UA status code to the agent's quality code.
// The sub-code is ignored: the upper 16 bits name the condition.
func statusQuality(s ua.StatusCode) string {
	switch ua.StatusCode(uint32(s) & 0xFFFF0000) {
	case ua.StatusBadTimeout, ua.StatusBadRequestTimeout:
		return adapters.CodeTimeout
	case ua.StatusBadTypeMismatch, ua.StatusBadDecodingError, ua.StatusBadEncodingError,
		ua.StatusBadDataTypeIDUnknown, ua.StatusBadDataEncodingInvalid, ua.StatusBadDataEncodingUnsupported,
		ua.StatusBadEncodingLimitsExceeded, ua.StatusBadOutOfRange:
		return adapters.CodeBadData
	case ua.StatusBadServerNotConnected, ua.StatusBadCommunicationError, ua.StatusBadSessionClosed,
		ua.StatusBadSessionIDInvalid, ua.StatusBadSessionNotActivated, ua.StatusBadSecureChannelClosed,
		ua.StatusBadSecureChannelIDInvalid, ua.StatusBadConnectionClosed, ua.StatusBadNotConnected,
		ua.StatusBadNoCommunication, ua.StatusBadServerHalted, ua.StatusBadShutdown,
		ua.StatusBadOutOfService, ua.StatusBadDeviceFailure, ua.StatusBadSensorFailure,
		ua.StatusBadConnectionRejected, ua.StatusBadDisconnect, ua.StatusBadTCPInternalError:
		return adapters.CodeDeviceOffline
	case ua.StatusBadTooManyOperations, ua.StatusBadTooManySessions, ua.StatusBadResourceUnavailable,
		ua.StatusBadTooManyPublishRequests:
		return adapters.CodeDeviceBusy
	}
	return adapters.CodeReadError
}

// statusError is the error of a reading whose status is not Good.
func statusError(s ua.StatusCode) error {
	if uint32(s)&severityMask == severityUncertain {
		return adapters.WithCode(adapters.CodeReadError, fmt.Errorf("value is uncertain: %w", s))
	}
	return adapters.WithCode(statusQuality(s), s)
}

// classify gives err, from a gopcua call, the quality code its OPC-UA
// status says, and leaves network errors for adapters.Classify.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var qe *adapters.QualityError
	if errors.As(err, &qe) {
		return err
	}
	var s ua.StatusCode
	if errors.As(err, &s) {
		return adapters.WithCode(statusQuality(s), err)
	}
	return err
}
