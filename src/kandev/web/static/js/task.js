// The task page (conversation, composer, overlay): filled in next.
import "./app.js";
