package wire

import (
	"errors"
	"fmt"
)

// PDU types (clause 20.1).
const (
	PDUConfirmedRequest   = 0
	PDUUnconfirmedRequest = 1
	PDUSimpleAck          = 2
	PDUComplexAck         = 3
	PDUSegmentAck         = 4
	PDUError              = 5
	PDUReject             = 6
	PDUAbort              = 7
)

// Confirmed and unconfirmed service choices.
const (
	ServiceReadProperty         = 12
	ServiceReadPropertyMultiple = 14
	ServiceWriteProperty        = 15
	ServiceIAm                  = 0
	ServiceWhoIs                = 8
)

// ErrSegmented is returned for a segmented complex ack: the adapter asks
// with segmented-response-accepted off and does not reassemble segments.
var ErrSegmented = errors.New("bacnet: segmented answer; segmentation is not supported (read fewer properties per request or lower connection.maxApdu)")

// APDU is a decoded application layer PDU.
type APDU struct {
	Type     uint8
	InvokeID uint8
	Service  uint8
	// Segmented and MoreFollows are the segmentation bits of a confirmed
	// request or complex ack.
	Segmented, MoreFollows bool
	// Payload is the service request or ack data.
	Payload []byte
	// ErrorClass and ErrorCode are set for an Error PDU; Reason for a
	// Reject or Abort.
	ErrorClass, ErrorCode uint32
	Reason                uint8
	// Server is set on an Abort sent by the server.
	Server bool
}

// DecodeAPDU decodes the APDU header. A segmented complex ack decodes
// without error; the caller refuses it with ErrSegmented.
func DecodeAPDU(b []byte) (APDU, error) {
	if len(b) < 1 {
		return APDU{}, ErrTruncated
	}
	a := APDU{Type: b[0] >> 4}
	need := func(n int) error {
		if len(b) < n {
			return ErrTruncated
		}
		return nil
	}
	switch a.Type {
	case PDUConfirmedRequest:
		a.Segmented, a.MoreFollows = b[0]&0x08 != 0, b[0]&0x04 != 0
		off := 3
		if a.Segmented {
			off += 2
		}
		if err := need(off + 1); err != nil {
			return APDU{}, err
		}
		a.InvokeID, a.Service, a.Payload = b[2], b[off], b[off+1:]
	case PDUUnconfirmedRequest:
		if err := need(2); err != nil {
			return APDU{}, err
		}
		a.Service, a.Payload = b[1], b[2:]
	case PDUSimpleAck:
		if err := need(3); err != nil {
			return APDU{}, err
		}
		a.InvokeID, a.Service = b[1], b[2]
	case PDUComplexAck:
		a.Segmented, a.MoreFollows = b[0]&0x08 != 0, b[0]&0x04 != 0
		off := 2
		if a.Segmented {
			off += 2
		}
		if err := need(off + 1); err != nil {
			return APDU{}, err
		}
		a.InvokeID, a.Service, a.Payload = b[1], b[off], b[off+1:]
	case PDUSegmentAck:
		if err := need(4); err != nil {
			return APDU{}, err
		}
		a.InvokeID, a.Server = b[1], b[0]&0x01 != 0
	case PDUError:
		if err := need(3); err != nil {
			return APDU{}, err
		}
		a.InvokeID, a.Service = b[1], b[2]
		class, code, _, err := decodeErrorPair(b[3:])
		if err != nil {
			return APDU{}, fmt.Errorf("bacnet: error PDU: %w", err)
		}
		a.ErrorClass, a.ErrorCode = class, code
	case PDUReject:
		if err := need(3); err != nil {
			return APDU{}, err
		}
		a.InvokeID, a.Reason = b[1], b[2]
	case PDUAbort:
		if err := need(3); err != nil {
			return APDU{}, err
		}
		a.Server, a.InvokeID, a.Reason = b[0]&0x01 != 0, b[1], b[2]
	default:
		return APDU{}, fmt.Errorf("bacnet: unknown PDU type %d", a.Type)
	}
	return a, nil
}

// decodeErrorPair reads error class and error code, two application
// enumerations, optionally inside opening/closing tag 0 as some services'
// errors are wrapped.
func decodeErrorPair(b []byte) (class, code uint32, consumed int, err error) {
	off := 0
	wrapped := false
	if t, n, err := DecodeTag(b); err == nil && t.Opening && t.Number == 0 {
		off, wrapped = n, true
	}
	cv, n, err := DecodeApp(b[off:])
	if err != nil {
		return 0, 0, 0, err
	}
	off += n
	dv, n, err := DecodeApp(b[off:])
	if err != nil {
		return 0, 0, 0, err
	}
	off += n
	ce, ok1 := cv.(Enumerated)
	de, ok2 := dv.(Enumerated)
	if !ok1 || !ok2 {
		return 0, 0, 0, errors.New("error class and code are not enumerated")
	}
	if wrapped {
		n, err := expectBracket(b[off:], 0, false)
		if err != nil {
			return 0, 0, 0, err
		}
		off += n
	}
	return uint32(ce), uint32(de), off, nil
}

// Max APDU length codes of a confirmed request (clause 20.1.2.5).
var maxAPDUCodes = []int{50, 128, 206, 480, 1024, 1476}

// MaxAPDUCode is the code of the largest standard length <= n.
func MaxAPDUCode(n int) uint8 {
	code := uint8(0)
	for i, l := range maxAPDUCodes {
		if l <= n {
			code = uint8(i)
		}
	}
	return code
}

// AppendConfirmedRequest writes a confirmed request APDU with
// segmented-response-accepted off, announcing maxAPDU.
func AppendConfirmedRequest(dst []byte, invokeID, service uint8, maxAPDU int, payload []byte) []byte {
	return append(append(dst, PDUConfirmedRequest<<4, MaxAPDUCode(maxAPDU), invokeID, service), payload...)
}

// AppendUnconfirmedRequest writes an unconfirmed request APDU.
func AppendUnconfirmedRequest(dst []byte, service uint8, payload []byte) []byte {
	return append(append(dst, PDUUnconfirmedRequest<<4, service), payload...)
}

// AppendComplexAck, AppendSimpleAck, AppendError, AppendReject and
// AppendAbort build answers, as a device sends them; tests use them.
func AppendComplexAck(dst []byte, invokeID, service uint8, payload []byte) []byte {
	return append(append(dst, PDUComplexAck<<4, invokeID, service), payload...)
}

// AppendSimpleAck writes a simple ack.
func AppendSimpleAck(dst []byte, invokeID, service uint8) []byte {
	return append(dst, PDUSimpleAck<<4, invokeID, service)
}

// AppendError writes an Error PDU.
func AppendError(dst []byte, invokeID, service uint8, class, code uint32) []byte {
	dst = append(dst, PDUError<<4, invokeID, service)
	dst, _ = AppendApp(dst, Enumerated(class))
	dst, _ = AppendApp(dst, Enumerated(code))
	return dst
}

// AppendReject writes a Reject PDU.
func AppendReject(dst []byte, invokeID, reason uint8) []byte {
	return append(dst, PDUReject<<4, invokeID, reason)
}

// AppendAbort writes an Abort PDU sent by the server.
func AppendAbort(dst []byte, invokeID, reason uint8) []byte {
	return append(dst, PDUAbort<<4|0x01, invokeID, reason)
}

// Error is a BACnet Error PDU, or a per-property error of an RPM answer.
type Error struct {
	Class, Code uint32
}

func (e *Error) Error() string {
	return fmt.Sprintf("bacnet error %s: %s", nameOr(errorClassNames, e.Class), e.CodeName())
}

// CodeName is the error code's standard name, or its number.
func (e *Error) CodeName() string {
	if s, ok := errorCodeNames[e.Code]; ok {
		return s
	}
	return fmt.Sprintf("code %d", e.Code)
}

// RejectError is a Reject PDU.
type RejectError struct{ Reason uint8 }

func (e *RejectError) Error() string {
	return "bacnet reject: " + nameOr(rejectNames, uint32(e.Reason))
}

// AbortError is an Abort PDU.
type AbortError struct{ Reason uint8 }

func (e *AbortError) Error() string {
	s := "bacnet abort: " + nameOr(abortNames, uint32(e.Reason))
	if e.Reason == AbortSegmentationNotSupport || e.Reason == AbortBufferOverflow {
		s += " (the answer needs segmentation, which is not supported: read fewer properties per request or lower connection.maxApdu)"
	}
	return s
}

// AnswerError turns an answer that is not an ack into its error: an
// *Error, *RejectError, *AbortError or ErrSegmented; nil for an ack.
func (a APDU) AnswerError() error {
	switch a.Type {
	case PDUError:
		return &Error{Class: a.ErrorClass, Code: a.ErrorCode}
	case PDUReject:
		return &RejectError{Reason: a.Reason}
	case PDUAbort:
		return &AbortError{Reason: a.Reason}
	case PDUComplexAck:
		if a.Segmented {
			return ErrSegmented
		}
	case PDUSegmentAck:
		return ErrSegmented
	}
	return nil
}

// UnrecognizedService reports whether err says the device does not know
// the service: a Reject unrecognized-service, or an Error
// reject-unrecognized-service or optional-functionality-not-supported.
func UnrecognizedService(err error) bool {
	var re *RejectError
	var ee *Error
	switch {
	case errors.As(err, &re):
		return re.Reason == RejectUnrecognizedService
	case errors.As(err, &ee):
		return ee.Code == ErrorCodeRejectUnrecognizedService || ee.Code == ErrorCodeOptionalFunctionalityNotSupported
	}
	return false
}
