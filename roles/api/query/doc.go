// Package query is the PromQL-like language of POST /api/v1/readings/query:
// a lexer, a parser to an AST (Expr), validation against Limits, and a
// translation to SQL for PostgreSQL and SQLite whose results Run turns into
// series. No input reaches SQL as text: statements are built from constant
// fragments in sql.go, a fixed label whitelist and $n placeholders, which
// FuzzTranslate checks.
// Its Lexer and Scanner are exported for roles/api/promapi, which reads
// PromQL with the same tokens.
//
//	expr, err := query.Parse(src)                                // *ParseError, *LimitError
//	plan, err := query.NewPlan(expr, tenant, rng, dialect, lim)  // *ParamError, *LimitError
//	series, err := query.Run(ctx, d.ReadSQL(), plan)             // *LimitError past a cap
//
// Compile does the first two in one call. See docs/query-language.md.
package query
