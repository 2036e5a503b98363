import * as eventstore from '@eventstore/db-client';
import { persistentSubscriptionScenarios } from './support/persistent-scenarios.js';

// Persistent subscriptions with @eventstore/db-client 6.2.1 (esdb:// connection strings), the
// scenarios of grpc-persistent.e2e.spec.ts in a process of their own: the two clients register
// the same global protobuf classes.

persistentSubscriptionScenarios({ name: '@eventstore/db-client 6.2.1', lib: eventstore, scheme: 'esdb' });
