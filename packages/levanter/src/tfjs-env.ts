/**
 * @module tfjs's environment as levanter runs it, set when levanter is imported: before a model
 * is built, since its first tensor already goes to tfjs's default CPU backend, whose first write
 * prints a banner asking for tfjs-node unless PROD is set. PROD also drops per-op NaN checks and
 * deprecation chatter; `initBackend` sets the same again for callers that import files directly.
 */
import * as tf from '@tensorflow/tfjs'

tf.env().set('IS_NODE', true)
tf.env().set('PROD', true)
