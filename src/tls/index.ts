// TLS, the folder's face: the node's certificate set, loaded and checked before use (a reload that
// fails keeps the previous one), and the name match the cluster and leader routing check peers by.
export { loadCertificates, matchesName, type CertificateSet } from './certificates.js';
