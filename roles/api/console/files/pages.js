// Every page of the console, in navigation order. Adding a page is one
// module in pages/ and one line here (docs/web-consoles.md).
import agents from './pages/agents.js';
import agent from './pages/agent.js';
import device from './pages/device.js';
import readings from './pages/readings.js';
import dashboards from './pages/dashboards.js';
import fleets from './pages/fleets.js';
import fleet from './pages/fleet.js';
import jobs from './pages/jobs.js';
import job from './pages/job.js';
import users from './pages/users.js';
import apikeys from './pages/apikeys.js';
import provisioning from './pages/provisioning.js';
import audit from './pages/audit.js';
import licence from './pages/licence.js';
import anomaly from './pages/anomaly.js';

export default [
  agents,
  agent,
  device,
  readings,
  ...dashboards,
  fleets, fleet, jobs, job, anomaly, users, apikeys, provisioning, audit, licence,
];
