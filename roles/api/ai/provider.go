package ai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgeplat/edgeplat/config"
)

// Bounds of what a provider may answer: a body past maxResponseBytes, a
// round of more than maxToolCalls calls or a call's arguments past
// maxArgumentBytes are a broken answer (502), not something to read on.
const (
	maxResponseBytes = 1 << 20
	maxToolCalls     = 16
	maxArgumentBytes = 16 << 10
	maxToolCallID    = 200
)

// Message is one message of the chat-completions format: role system,
// user, assistant (with Content, ToolCalls or both) or tool (the result
// of the call ToolCallID names).
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a model's request to run one tool; Arguments is the JSON
// text of the tool's arguments, as the format carries it.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the tool and carries its arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolSpec offers one tool to the model.
type ToolSpec struct {
	Type     string       `json:"type"`
	Function FunctionSpec `json:"function"`
}

// FunctionSpec is a tool's name, purpose and JSON Schema of arguments.
type FunctionSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is a chat-completions request.
type Request struct {
	Model    string     `json:"model"`
	Messages []Message  `json:"messages"`
	Tools    []ToolSpec `json:"tools,omitempty"`
	// MaxTokens is what is left of the request's token budget, so that
	// the provider itself stops a completion that would overrun it.
	MaxTokens   int     `json:"max_tokens,omitempty"`
	Temperature float64 `json:"temperature"`
}

// Usage is what the provider counted for one call.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// Completion is a decoded provider answer: the first choice's message.
type Completion struct {
	Message      Message
	FinishReason string
	Usage        Usage
	// Counted is false when the provider sent no usage; the caller then
	// estimates what the call cost.
	Counted bool
}

// ProviderError is a provider answer that is no usable completion: an
// error status, or a body that is not the chat-completions format
// (502 ai_provider_error).
type ProviderError struct{ Msg string }

func (e *ProviderError) Error() string { return "ai provider: " + e.Msg }

// ErrTimeout is a provider call that took longer than api.ai_timeout
// (504 ai_provider_timeout).
var ErrTimeout = errors.New("ai provider: no answer within the timeout")

func providerErrorf(format string, args ...any) error {
	return &ProviderError{Msg: fmt.Sprintf(format, args...)}
}

var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// wire is the chat-completions answer as sent; content stays raw since a
// provider may send null, a string, or (not accepted) an array of parts.
type wire struct {
	Choices []struct {
		Message struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []ToolCall      `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// DecodeResponse reads a chat-completions answer. Whatever the provider
// sends, the result is either a completion whose message has an answer,
// tool calls or both, each call with an id, a valid tool name and
// arguments within bounds, or a *ProviderError saying what was wrong.
func DecodeResponse(b []byte) (Completion, error) {
	if len(b) > maxResponseBytes {
		return Completion{}, providerErrorf("answer of %d bytes is over the %d-byte limit", len(b), maxResponseBytes)
	}
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return Completion{}, providerErrorf("answer is not a chat completion: %v", err)
	}
	if w.Error != nil {
		return Completion{}, providerErrorf("error: %s", clip(w.Error.Message, 200))
	}
	if len(w.Choices) == 0 {
		return Completion{}, providerErrorf("answer has no choices")
	}
	ch := w.Choices[0]
	var c Completion
	if r := ch.Message.Role; r != "" && r != "assistant" {
		return Completion{}, providerErrorf("answer's message has role %q, want assistant", clip(r, 40))
	}
	c.Message.Role = "assistant"
	switch raw := bytes.TrimSpace(ch.Message.Content); {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &c.Message.Content); err != nil {
			return Completion{}, providerErrorf("answer's content: %v", err)
		}
	default:
		return Completion{}, providerErrorf("answer's content must be a string or null")
	}
	if len(ch.Message.ToolCalls) > maxToolCalls {
		return Completion{}, providerErrorf("answer asks for %d tool calls, more than %d", len(ch.Message.ToolCalls), maxToolCalls)
	}
	seen := map[string]bool{}
	for i, tc := range ch.Message.ToolCalls {
		switch {
		case tc.ID == "" || len(tc.ID) > maxToolCallID || !utf8.ValidString(tc.ID):
			return Completion{}, providerErrorf("tool_calls[%d].id must be 1..%d bytes of UTF-8", i, maxToolCallID)
		case seen[tc.ID]:
			return Completion{}, providerErrorf("tool_calls[%d].id %q is used twice", i, clip(tc.ID, 40))
		case tc.Type != "" && tc.Type != "function":
			return Completion{}, providerErrorf("tool_calls[%d].type must be function, got %q", i, clip(tc.Type, 40))
		case !toolNamePattern.MatchString(tc.Function.Name):
			return Completion{}, providerErrorf("tool_calls[%d].function.name must be 1..64 of A-Z a-z 0-9 _ -, got %q", i, clip(tc.Function.Name, 70))
		case len(tc.Function.Arguments) > maxArgumentBytes:
			return Completion{}, providerErrorf("tool_calls[%d].function.arguments is over %d bytes", i, maxArgumentBytes)
		}
		seen[tc.ID] = true
		tc.Type = "function"
		if strings.TrimSpace(tc.Function.Arguments) == "" {
			tc.Function.Arguments = "{}"
		}
		c.Message.ToolCalls = append(c.Message.ToolCalls, tc)
	}
	if c.Message.Content == "" && len(c.Message.ToolCalls) == 0 {
		return Completion{}, providerErrorf("answer's message has neither content nor tool calls (finish_reason %q)", clip(ch.FinishReason, 40))
	}
	c.FinishReason = ch.FinishReason
	if w.Usage != nil {
		u := *w.Usage
		if u.PromptTokens < 0 || u.CompletionTokens < 0 || u.TotalTokens < 0 || u.TotalTokens > 1<<40 {
			return Completion{}, providerErrorf("answer's usage has a negative or impossible count")
		}
		if u.TotalTokens == 0 {
			u.TotalTokens = u.PromptTokens + u.CompletionTokens
		}
		c.Usage, c.Counted = u, true
	}
	return c, nil
}

// clip shortens what a provider sent for a message, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// Provider calls an OpenAI-compatible chat-completions endpoint.
type Provider struct {
	url     string
	model   string
	key     config.Secret
	timeout time.Duration
	client  *http.Client
}

// NewProvider returns the provider cfg configures, or nil when
// api.ai_provider_url is empty.
func NewProvider(cfg config.API) *Provider {
	if cfg.AIProviderURL == "" {
		return nil
	}
	u := strings.TrimRight(cfg.AIProviderURL, "/")
	if !strings.HasSuffix(u, "/chat/completions") {
		u += "/chat/completions"
	}
	timeout := cfg.AITimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return &Provider{url: u, model: cfg.AIModel, key: cfg.AIAPIKey, timeout: timeout, client: &http.Client{}}
}

// Model is the model the provider is asked for.
func (p *Provider) Model() string { return p.model }

// Complete sends req (its Model set here) and decodes the answer. A call
// past the timeout is ErrTimeout; a cancelled ctx (the client went away)
// is ctx's error.
func (p *Provider) Complete(ctx context.Context, req Request) (Completion, error) {
	req.Model = p.model
	body, err := json.Marshal(req)
	if err != nil {
		return Completion{}, fmt.Errorf("encode chat request: %w", err)
	}
	cctx, cancel := context.WithTimeoutCause(ctx, p.timeout, ErrTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(cctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return Completion{}, fmt.Errorf("build chat request: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if p.key.IsSet() {
		hr.Header.Set("Authorization", "Bearer "+p.key.Reveal())
	}
	resp, err := p.client.Do(hr)
	if err == nil {
		defer resp.Body.Close()
		var b []byte
		b, err = io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
		if err == nil {
			if resp.StatusCode != http.StatusOK {
				return Completion{}, statusError(resp.StatusCode, b)
			}
			return DecodeResponse(b)
		}
	}
	switch {
	case ctx.Err() != nil:
		return Completion{}, fmt.Errorf("chat request: %w", ctx.Err())
	case errors.Is(context.Cause(cctx), ErrTimeout):
		return Completion{}, ErrTimeout
	}
	return Completion{}, providerErrorf("unreachable: %v", err)
}

// statusError words a provider's error answer, with its own message
// when it sent one in the usual error shape.
func statusError(status int, body []byte) error {
	var w struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := ""
	if json.Unmarshal(body, &w) == nil && w.Error.Message != "" {
		msg = ": " + clip(w.Error.Message, 200)
	}
	return providerErrorf("status %s%s", strconv.Itoa(status), msg)
}
