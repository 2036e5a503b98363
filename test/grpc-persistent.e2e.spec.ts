import * as kurrent from '@kurrent/kurrentdb-client';
import { persistentSubscriptionScenarios } from './support/persistent-scenarios.js';

// Persistent subscriptions with @kurrent/kurrentdb-client 1.3.1 (issue 32); the scenarios are
// shared with @eventstore/db-client 6.2.1 (grpc-persistent-client6.e2e.spec.ts), which needs a
// process of its own.

persistentSubscriptionScenarios({ name: '@kurrent/kurrentdb-client 1.3.1', lib: kurrent, scheme: 'kurrentdb' });
