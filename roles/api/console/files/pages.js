// Every page of the console, in navigation order. Adding a page is one
// module in pages/ and one line here (docs/web-consoles.md).
import agents from './pages/agents.js';
import agent from './pages/agent.js';
import device from './pages/device.js';
import readings from './pages/readings.js';
import dashboards from './pages/dashboards.js';

export default [
  agents,
  agent,
  device,
  readings,
  ...dashboards,
];
