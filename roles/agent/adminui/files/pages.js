// The admin UI's pages, in navigation order (docs/web-consoles.md,
// "Adding a page": one module in pages/ and one line here).
import overview from './pages/overview.js';
import endpoints from './pages/endpoints.js';
import endpointNew from './pages/endpoint-new.js';
import endpointEdit from './pages/endpoint-edit.js';
import device from './pages/device.js';
import publishing from './pages/publishing.js';
import destinationForm from './pages/destination-form.js';
import subscriptionForm from './pages/subscription-form.js';
import provisioning from './pages/provisioning.js';
import logs from './pages/logs.js';
import settings from './pages/settings.js';
import users from './pages/users.js';
import jobs from './pages/jobs.js';
import apps from './pages/apps.js';
import appNew from './pages/app-new.js';
import app from './pages/app.js';
import drift from './pages/drift.js';
import anomaly from './pages/anomaly.js';
import discovery from './pages/discovery.js';
import simulation from './pages/simulation.js';

export default [
  overview,
  endpoints,
  endpointNew,
  endpointEdit,
  device,
  discovery,
  apps,
  appNew,
  app,
  publishing,
  destinationForm,
  subscriptionForm,
  anomaly,
  drift,
  simulation,
  provisioning,
  logs,
  settings,
  users,
  jobs,
];
