// Package query is the PromQL-like language of POST /api/v1/readings/query:
// a lexer, a parser to an AST (Expr), validation against Limits, and a
// translation to SQL for PostgreSQL and SQLite whose results Run turns into
// series. docs/query-language.md is the user's reference: grammar,
// functions, limits and errors.
//
//	expr, err := query.Parse(src)                                // *ParseError, *LimitError
//	plan, err := query.NewPlan(expr, tenant, rng, dialect, lim)  // *ParamError, *LimitError
//	series, err := query.Run(ctx, d.ReadSQL(), plan)             // *LimitError past a cap
//
// Compile does the first two in one call.
//
// # Evaluation
//
// The database does the heavy part: it filters the tenant's readings by the
// matchers and time range and, for a range function, reduces each series to
// one row per time bucket (count, sum, min, max, first and last sample, and
// the increase with counter resets). Buckets are step wide when the range
// selector's width is a multiple of the step, the usual case, and
// gcd(range, step) wide otherwise, so every window [t-range, t) is a whole
// number of buckets. Go then folds the buckets of each window (a sliding
// fold that never subtracts, so sums do not drift), applies the function,
// and streams each series into the aggregations. Rows arrive ordered by
// series, so memory holds one series' buckets plus the aggregation state.
//
// # No input reaches SQL as text
//
// The SQL text is built only from constant fragments in sql.go, the column
// expressions of a fixed label whitelist (chosen by a switch on label names
// the parser has already checked), core/db's time bucket expression whose
// only variable part is an integer bucket width, and $n placeholders. Every
// value from the query (label values, regular expressions translated or
// not) and every time, limit and tenant id is a bound argument. The tenant
// condition tenant_id = $1 is always present and the language has no way
// to name tenant_id. FuzzTranslate checks, for arbitrary input, that the SQL
// contains only whitelisted tokens, is identical when every user string is
// replaced, and that each user string is among the arguments.
//
// # Regular expressions
//
// RE2 on both engines, always anchored (full match). SQLite gets Go's
// regexp through the function edgeplat_re_match, registered with the
// modernc driver in init. PostgreSQL gets an ARE that pgRegex writes from
// the RE2 parse tree using only constructs both engines read alike; the
// few RE2 features outside that subset (\b, (?m), counts above 255) are
// refused on both engines so a query means the same everywhere.
package query
