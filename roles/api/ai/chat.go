package ai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/registry"
)

// Bounds of a chat request.
const (
	maxMessageRunes = 4000
	maxHistory      = 20
	// defaultBudget is the token budget when the setting is unset (as in
	// tests that build Deps by hand).
	defaultBudget = 20000
)

// Turn is an earlier message of the conversation, which the client keeps:
// the API stores no conversation.
type Turn struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatInput is the body of POST /ai/chat.
type ChatInput struct {
	Message string `json:"message"`
	// AgentUUID and FleetID name what the question is about; each must be
	// the caller's tenant's.
	AgentUUID string `json:"agentUuid"`
	FleetID   string `json:"fleetId"`
	History   []Turn `json:"history"`
}

// ToolUse is one tool call of the conversation, in the answer.
type ToolUse struct {
	Round     int    `json:"round"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Outcome   string `json:"outcome"`
}

// UsageReport is what a request spent of its budget.
type UsageReport struct {
	Tokens int64 `json:"tokens"`
	Budget int64 `json:"budget"`
	// Estimated is true when the provider sent no counts for some call,
	// whose cost was then estimated at one token per 4 bytes.
	Estimated bool `json:"estimated"`
}

// ChatAnswer is the answer of POST /ai/chat.
type ChatAnswer struct {
	Answer    string      `json:"answer"`
	Model     string      `json:"model"`
	Rounds    int         `json:"rounds"`
	ToolCalls []ToolUse   `json:"toolCalls"`
	Usage     UsageReport `json:"usage"`
}

const systemPrompt = `You are the assistant of an industrial IoT platform. You answer questions about the user's edge agents (devices), fleets, telemetry readings, anomaly incidents and events.
Use the tools to read the platform's data; never guess values. The tools only read: you cannot change anything, and you must not claim to.
You see only the user's own organisation; a record the tools answer not_found for does not exist for this user.
Answer briefly, in plain text, citing metric names, values with units and times from the tool results.`

// chat serves POST /ai/chat: the tool-calling loop.
func (h *handler) chat(c *gin.Context) {
	const route = "chat"
	who, ok := h.reader(c)
	if !ok {
		return
	}
	if h.provider == nil {
		h.m.requests.WithLabelValues(route, CodeNotConfigured).Inc()
		h.WriteError(c, http.StatusServiceUnavailable, CodeNotConfigured, "no AI provider is configured (api.ai_provider_url); see docs/ai-assistant.md")
		return
	}
	var in ChatInput
	if !httpx.BindStrict(c, maxBody, &in, h.WriteError) {
		return
	}
	if msg := in.check(); msg != "" {
		h.invalid(c, route, msg)
		return
	}
	ctx := c.Request.Context()
	tb, err := newToolbox(h.Deps, who.TenantUUID, h.Now())
	if err != nil {
		h.fail(c, route, err)
		return
	}
	about, err := h.context(ctx, tb, in)
	var te *toolError
	if errors.As(err, &te) && te.Code == "not_found" {
		h.m.requests.WithLabelValues(route, "not_found").Inc()
		h.WriteError(c, http.StatusNotFound, "not_found", te.Msg)
		return
	}
	if err != nil {
		h.fail(c, route, err)
		return
	}
	msgs := []Message{{Role: "system", Content: systemPrompt + about}}
	for _, t := range in.History {
		msgs = append(msgs, Message{Role: t.Role, Content: t.Content})
	}
	msgs = append(msgs, Message{Role: "user", Content: in.Message})
	ans, err := h.converse(ctx, tb, msgs)
	if err != nil {
		h.fail(c, route, err)
		return
	}
	h.m.requests.WithLabelValues(route, "ok").Inc()
	c.JSON(http.StatusOK, ans)
}

// check returns what is wrong with the body, naming the field; "" when
// nothing is.
func (in *ChatInput) check() string {
	in.Message = strings.TrimSpace(in.Message)
	switch {
	case in.Message == "":
		return "message: is required"
	case utf8.RuneCountInString(in.Message) > maxMessageRunes:
		return "message: at most " + itoa(maxMessageRunes) + " characters"
	case len(in.History) > maxHistory:
		return "history: at most " + itoa(maxHistory) + " turns, got " + itoa(int64(len(in.History)))
	}
	for i, t := range in.History {
		p := "history[" + strconv.Itoa(i) + "]"
		if t.Role != "user" && t.Role != "assistant" {
			return p + ".role: must be user or assistant, got " + strconv.Quote(clip(t.Role, 40))
		}
		if t.Content == "" || utf8.RuneCountInString(t.Content) > maxMessageRunes {
			return p + ".content: must be 1.." + itoa(maxMessageRunes) + " characters"
		}
	}
	for _, f := range []struct{ name, v string }{{"agentUuid", in.AgentUUID}, {"fleetId", in.FleetID}} {
		if f.v != "" {
			if _, err := codec.ParseUUID(f.v); err != nil {
				return f.name + ": must be a hyphenated UUID, got " + strconv.Quote(clip(f.v, 64))
			}
		}
	}
	return ""
}

// context describes the records the question names for the system
// prompt; a record that is not the tenant's is a not_found toolError.
func (h *handler) context(ctx context.Context, tb *toolbox, in ChatInput) (string, error) {
	var b strings.Builder
	if in.AgentUUID != "" {
		a, err := tb.agent(ctx, in.AgentUUID)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "\nThe question is about agent %q (agentUuid %s).", a.Name, a.UUID)
	}
	if in.FleetID != "" {
		u, _ := codec.ParseUUID(in.FleetID)
		f, err := h.Agents.Fleet(ctx, tb.tenant, u.String())
		if errors.Is(err, registry.ErrNotFound) {
			return "", notFound("fleet")
		}
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "\nThe question is about fleet %q (fleetId %s).", f.Name, f.ID)
	}
	return b.String(), nil
}

// converse runs the loop: the model answers or asks for tools, whose
// results go back to it, until it answers, the budget is spent or
// maxRounds calls were made.
func (h *handler) converse(ctx context.Context, tb *toolbox, msgs []Message) (ChatAnswer, error) {
	ans := ChatAnswer{Model: h.provider.Model(), ToolCalls: []ToolUse{}}
	budget := int64(h.Config.AITokenBudget)
	if budget <= 0 {
		budget = defaultBudget
	}
	ans.Usage.Budget = budget
	for round := 1; ; round++ {
		if round > maxRounds {
			return ChatAnswer{}, roundsError{}
		}
		left := budget - ans.Usage.Tokens
		if left <= 0 {
			return ChatAnswer{}, &budgetError{spent: ans.Usage.Tokens, budget: budget}
		}
		req := Request{Messages: msgs, Tools: toolSpecs, MaxTokens: int(left)}
		comp, err := h.provider.Complete(ctx, req)
		if err != nil {
			return ChatAnswer{}, err
		}
		ans.Rounds = round
		h.spend(&ans.Usage, comp, req)
		if len(comp.Message.ToolCalls) == 0 {
			ans.Answer = comp.Message.Content
			return ans, nil
		}
		if ans.Usage.Tokens >= budget {
			return ChatAnswer{}, &budgetError{spent: ans.Usage.Tokens, budget: budget}
		}
		msgs = append(msgs, comp.Message)
		for _, call := range comp.Message.ToolCalls {
			content, outcome, err := tb.run(ctx, call)
			if err != nil {
				return ChatAnswer{}, err
			}
			h.m.toolCalls.WithLabelValues(toolLabel(call.Function.Name), outcome).Inc()
			ans.ToolCalls = append(ans.ToolCalls, ToolUse{Round: round, Name: call.Function.Name, Arguments: call.Function.Arguments, Outcome: outcome})
			msgs = append(msgs, Message{Role: "tool", ToolCallID: call.ID, Content: content})
		}
	}
}

// spend adds a call's cost to u: the provider's count, else an estimate
// of one token per 4 bytes of what went and came back.
func (h *handler) spend(u *UsageReport, comp Completion, req Request) {
	n := comp.Usage.TotalTokens
	if !comp.Counted {
		size := len(comp.Message.Content)
		for _, m := range req.Messages {
			size += len(m.Content)
		}
		for _, tc := range comp.Message.ToolCalls {
			size += len(tc.Function.Arguments)
		}
		n, u.Estimated = int64(size/4+1), true
	}
	u.Tokens += n
	h.m.tokens.Add(float64(n))
}

func itoa[T int | int64](n T) string { return strconv.FormatInt(int64(n), 10) }
