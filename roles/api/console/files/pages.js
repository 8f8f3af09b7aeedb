// Every page of the console, in navigation order. Adding a page is one
// module in pages/ and one line here (docs/web-consoles.md).
import agents from './pages/agents.js';

export default [
  agents,
];
